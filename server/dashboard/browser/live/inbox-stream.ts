/**
 * Minimal stand-in; replaced by the live module (DASHBOARD.md names its interface, which is kept
 * exactly). One plain EventSource per site in this tab: the browser resumes it with Last-Event-ID by
 * itself; when it gives up (the server refused the id, or the session ended) a fresh stream starts
 * from now and the resync listeners reload. No sharing between tabs, no catch-up detection.
 */
import { setConnection } from '../connection';

export type InboxLiveEventName = 'conversation.started' | 'message.created' | 'conversation.closed' | 'conversation.assigned' | 'conversation.read';

export interface InboxLiveEvent {
  id: string;
  name: InboxLiveEventName;
  data: unknown;
  replayed: boolean;
}

const NAMES: InboxLiveEventName[] = ['conversation.started', 'message.created', 'conversation.closed', 'conversation.assigned', 'conversation.read'];

interface Stream {
  source: EventSource | null;
  listeners: Set<(e: InboxLiveEvent) => void>;
  resync: Set<() => void>;
  retry?: ReturnType<typeof setTimeout>;
  lastId: number;
}

const streams = new Map<string, Stream>();

function stream(siteId: string): Stream {
  let s = streams.get(siteId);
  if (!s) {
    s = { source: null, listeners: new Set(), resync: new Set(), lastId: 0 };
    streams.set(siteId, s);
  }
  return s;
}

function open(siteId: string, s: Stream, again: boolean) {
  setConnection(again ? 'reconnecting' : 'connecting');
  const source = new EventSource(`/manage/v1/sites/${encodeURIComponent(siteId)}/inbox/events`, { withCredentials: true });
  s.source = source;
  source.addEventListener('ready', () => {
    setConnection('live');
    if (again) for (const l of s.resync) l();
  });
  for (const name of NAMES)
    source.addEventListener(name, (e) => {
      const m = e as MessageEvent<string>;
      const id = Number(m.lastEventId);
      if (id <= s.lastId) return; // seen already
      s.lastId = id;
      let data: unknown;
      try {
        data = JSON.parse(m.data);
      } catch {
        return;
      }
      for (const l of s.listeners) l({ id: m.lastEventId, name, data, replayed: false });
    });
  // Closed for good (a refused Last-Event-ID, an ended session): start over from now, and reload.
  const restart = () => {
    source.close();
    setConnection('offline');
    s.source = null;
    s.lastId = 0;
    s.retry = setTimeout(() => {
      s.retry = undefined;
      if (s.listeners.size) open(siteId, s, true);
    }, 3000);
  };
  source.addEventListener('session-ended', restart);
  source.onerror = () => {
    if (source.readyState === EventSource.CONNECTING) return setConnection('reconnecting');
    restart();
  };
}

function stopIfUnused(siteId: string, s: Stream) {
  if (s.listeners.size || s.resync.size) return;
  s.source?.close();
  clearTimeout(s.retry);
  streams.delete(siteId);
  setConnection('none');
}

export function subscribeInbox(siteId: string, listener: (event: InboxLiveEvent) => void): () => void {
  const s = stream(siteId);
  s.listeners.add(listener);
  if (!s.source && s.retry === undefined) open(siteId, s, false);
  return () => {
    s.listeners.delete(listener);
    stopIfUnused(siteId, s);
  };
}

export function onResync(siteId: string, listener: () => void): () => void {
  const s = stream(siteId);
  s.resync.add(listener);
  return () => {
    s.resync.delete(listener);
    stopIfUnused(siteId, s);
  };
}
