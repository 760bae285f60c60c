/**
 * The state of the live connection, shown in the header's slot (app.tsx). Nothing sets it yet: the
 * inbox's live stream will call `setConnection` as it connects, drops and resumes.
 */
import { useEffect, useState } from 'preact/hooks';

export type ConnectionState = 'none' | 'connecting' | 'live' | 'reconnecting' | 'offline';

let state: ConnectionState = 'none';
const listeners = new Set<(s: ConnectionState) => void>();

export function setConnection(next: ConnectionState): void {
  state = next;
  for (const l of listeners) l(next);
}

export function useConnection(): ConnectionState {
  const [s, set] = useState(state);
  useEffect(() => {
    listeners.add(set);
    return () => void listeners.delete(set);
  }, []);
  return s;
}
