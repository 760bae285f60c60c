/**
 * The panel's live connection: the visitor's event stream (Server-Sent Events read with fetch,
 * since EventSource cannot send Authorization), polling when the service has no room for one more
 * stream. One tab of a visitor holds it (Web Locks) and shares what it hears with the others
 * (BroadcastChannel). A tab that cannot take part keeps a stream of its own: where the browser
 * refuses the framed panel its storage, `navigator.locks.request` rejects with SecurityError, and
 * nothing may wait on a lock that never comes.
 */

import type { components, operations } from '../generated/api';
import { readSse } from '../../browser-shared/sse';
import { lockManager, openChannel, requestLeadership } from '../../browser-shared/leader';

/**
 * What the stream carries: the visitor's feed (FeedEvent in openapi/window.yaml), and the stream's
 * own `ready` (the position it starts from) and `token-expired`.
 */
export type FeedEvent =
  | components['schemas']['FeedEvent']
  | { id?: string; event: 'ready'; data: { lastEventId?: string } }
  | { id?: undefined; event: 'token-expired'; data: object }
  | (components['schemas']['TypingEvent'] & { id?: undefined });

type PollAnswer = operations['pollVisitorEvents']['responses'][200]['content']['application/json'];

export interface LiveOptions {
  /** The lock's and the channel's name: one per site and visitor. */
  name: string;
  /** Ends the connection (a new session, another visitor). */
  signal: AbortSignal;
  /** A call with the window token, renewed when refused. */
  api(path: string, init: RequestInit, signal: AbortSignal): Promise<Response>;
  /** A new token after the stream said its token may no longer be used (it may end the session instead). */
  renew(): Promise<void>;
  /** Every event, heard on the stream or from the tab that holds it. */
  onEvent(e: FeedEvent): void;
  onStatus(text: string): void;
}

export interface Live {
  /** Where a stream resumes (Last-Event-ID): the history's position, then each event heard. */
  lastEventId: string | null;
  /**
   * `leader`: holds the lock, streams and shares; `follower`: waits for the lock and hears the
   * leader; `alone`: a stream of its own, since no lock or channel could be had.
   */
  role: 'idle' | 'leader' | 'follower' | 'alone';
  /** Starts reading (call it once the history is shown: the stream resumes right after it). */
  start(): void;
  /** Stops listening before start (a session attempt that failed). */
  close(): void;
}

export const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * Opens the connection's listening side at once (a follower hears the leader while the history
 * loads, so nothing falls between the two); `start()` then takes the lock or streams alone.
 */
export function openLive(o: LiveOptions): Live {
  const locks = lockManager();
  let channel = locks && openChannel(o.name);
  const root = document.documentElement;

  const hear = (e: FeedEvent) => {
    if (e.id) live.lastEventId = e.id;
    if (e.event === 'ready' && e.data.lastEventId) live.lastEventId = e.data.lastEventId;
    o.onEvent(e);
  };
  const close = () => {
    channel?.close();
    channel = null;
  };
  const alone = () => {
    close();
    live.role = 'alone';
    void follow(o, live, hear);
  };
  const lead = async () => {
    live.role = 'leader';
    root.dataset.leader = 'true';
    await follow(o, live, (e) => {
      hear(e);
      try {
        if (e.event !== 'ready') channel?.postMessage(e);
      } catch {
        // the channel broke: this tab still hears its own stream
      }
    });
    delete root.dataset.leader;
  };

  const live: Live = {
    lastEventId: null,
    role: 'idle',
    close,
    start() {
      if (!locks || !channel) return alone();
      live.role = 'follower';
      // Aborted: the session is over. Refused (storage blocked) or broken: stream alone.
      requestLeadership(o.name, o.signal, lead, alone);
    },
  };
  if (channel) channel.onmessage = (m: MessageEvent<FeedEvent>) => hear(m.data);
  o.signal.addEventListener('abort', close, { once: true });
  return live;
}

/** Reads one Server-Sent Events answer until it ends; a malformed event is skipped, the stream goes on. */
function readStream(body: ReadableStream<Uint8Array>, deliver: (e: FeedEvent) => void) {
  return readSse(body, (m) => {
    try {
      deliver({ id: m.id, event: m.event, data: JSON.parse(m.data) } as FeedEvent);
    } catch {
      // skipped
    }
  });
}

/** The stream, reconnecting with backoff, and polling when the service has no room for one more stream. */
async function follow(o: LiveOptions, live: Live, deliver: (e: FeedEvent) => void) {
  const { signal } = o;
  let backoff = 1000;
  while (!signal.aborted) {
    try {
      const headers: Record<string, string> = { Accept: 'text/event-stream' };
      if (live.lastEventId) headers['Last-Event-ID'] = live.lastEventId;
      const res = await o.api('/events', { headers }, signal);
      if (res.ok && res.body) {
        o.onStatus('');
        backoff = 1000;
        let expired = false;
        await readStream(res.body, (e) => (e.event === 'token-expired' ? (expired = true) : deliver(e)));
        // Revoked, or just old: a reconnection with the same token would only be refused.
        if (expired) await o.renew();
      } else if (res.status === 400) {
        live.lastEventId = null; // a position the service no longer knows: start from now
      } else if (res.status === 503 || res.status === 429) {
        await poll(o, live, deliver, 30_000);
        continue;
      }
    } catch {
      if (signal.aborted) return;
      o.onStatus('Connection lost. Reconnecting…');
    }
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 30_000);
  }
}

async function poll(o: LiveOptions, live: Live, deliver: (e: FeedEvent) => void, forMs: number) {
  const until = Date.now() + forMs;
  while (!o.signal.aborted && Date.now() < until) {
    const q = live.lastEventId ? `?lastEventId=${encodeURIComponent(live.lastEventId)}` : '';
    try {
      const res = await o.api(`/events/poll${q}`, {}, o.signal);
      if (res.ok) {
        const body = (await res.json()) as PollAnswer;
        for (const e of body.data) deliver(e);
        live.lastEventId = body.lastEventId;
        if (body.hasMore) continue;
      }
    } catch {
      // offline: try again after the pause
    }
    await sleep(3000, o.signal);
  }
}
