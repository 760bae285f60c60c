/**
 * The state of the live connection, shown in the header's slot (app.tsx, live/status.tsx): the
 * inbox's live stream (live/hub.ts) sets it as it connects, drops and resumes, and after a resume
 * sets how many updates arrived as its catch-up.
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

/** A catch-up after a reconnect: how many updates it brought, and a serial so the same count twice is news twice. */
export interface CatchUp {
  count: number;
  serial: number;
}

let catchUp: CatchUp | null = null;
const catchUpListeners = new Set<(c: CatchUp | null) => void>();

export function setCatchUp(count: number): void {
  catchUp = { count, serial: (catchUp?.serial ?? 0) + 1 };
  for (const l of catchUpListeners) l(catchUp);
}

export function useCatchUp(): CatchUp | null {
  const [c, set] = useState(catchUp);
  useEffect(() => {
    catchUpListeners.add(set);
    return () => void catchUpListeners.delete(set);
  }, []);
  return c;
}
