/**
 * One live stream of a site's inbox for every tab of this browser (docs/dashboard.md, "Live updates
 * and notifications"). A tab that holds the site's Web Lock is the leader: it reads
 * `GET /manage/v1/sites/{siteId}/inbox/events` with fetch() and relays every event and its
 * connection state to the other tabs over a BroadcastChannel; the others wait for the lock, so when
 * the leader's tab closes one of them takes over, resuming after the last id it saw. Where the lock
 * is refused (storage blocked: it rejects with SecurityError) each tab keeps its own stream.
 *
 * fetch() rather than EventSource: it shows the status (a 401 goes through api.ts like any call's,
 * a 503's Retry-After is honoured), sends Last-Event-ID on every new connection (an EventSource
 * sends it only on its own reconnects), and lets a watchdog replace a socket that went silent (a
 * sleeping laptop, a proxy that dropped the connection without closing it). Who is signed in is
 * session.ts's, for every tab and every page: the leader's 401 opens the dialog there and is told
 * to the other tabs, and a sign-in in any tab resumes a leader parked after its person closed it.
 */
import { ApiFailure, send } from '../api';
import { onSignedIn } from '../session';
import { setCatchUp, setConnection, type ConnectionState } from '../connection';
import { createSseParser, type SseMessage } from './sse';
import type { InboxLiveEvent, InboxLiveEventName } from './events';

const NAMES: ReadonlySet<string> = new Set<InboxLiveEventName>([
  'conversation.started',
  'message.created',
  'conversation.closed',
  'conversation.assigned',
  'conversation.read',
  'note.created',
  'note.updated',
  'note.deleted',
  'note.mentioned',
  'visitor.context',
  'conversation.tagged',
]);

/** The server pings every 15 s: this long without a byte means the socket is dead. */
const WATCHDOG_MS = 40_000;
/** How often the watchdog looks; a much longer gap between two looks means the machine slept. */
const TICK_MS = 5_000;
/** After a wake-up (sleep, `online`, the tab shown again), a stream quiet for longer than a ping is replaced at once. */
const FRESH_MS = 20_000;
/** Backoff of reconnections: doubling from 1 s to this, each with jitter. */
const MAX_BACKOFF_MS = 30_000;
/** A stream that lasted this long was fine: its end starts the backoff over. */
const STABLE_MS = 30_000;
/** A session the person chose not to renew, or a membership gone: try again this much later (or at a wake-up). */
const PARKED_MS = 5 * 60_000;
/** Replayed events with ids past `ready`'s tail cannot come; this ends a catch-up whose last events were not for us. */
const CATCH_UP_SETTLE_MS = 1_000;

/**
 * Tests (and only they) tune the timings and record what tabs received, through an object an init
 * script sets before the app loads; without it the defaults above apply.
 */
interface TestHooks {
  watchdogMs?: number;
  tickMs?: number;
  events?: InboxLiveEvent[];
  role?: Record<string, Role>;
  resyncs?: number;
}
const hooks = (): TestHooks | undefined => (globalThis as { __dashboardLive?: TestHooks }).__dashboardLive;

type Role = 'waiting' | 'leader' | 'solo';

/** What tabs say to each other about a site's stream. */
type Wire =
  | { type: 'hello' }
  | { type: 'state'; state: ConnectionState; lastId: number }
  | { type: 'event'; event: InboxLiveEvent }
  | { type: 'catch-up'; count: number }
  | { type: 'resync'; lastId: number };

interface Ready {
  lastEventId?: string;
  tail?: string;
  gap?: boolean;
}

const hubs = new Map<string, SiteHub>();

class SiteHub {
  readonly listeners = new Set<(e: InboxLiveEvent) => void>();
  readonly resyncListeners = new Set<() => void>();
  role: Role = 'waiting';
  /** The highest id delivered in this tab (-1: none yet; 0 is a feed's position before its first change): nothing at or below it is delivered again. */
  private lastId = -1;
  private state: ConnectionState = 'connecting';
  private closed = false;
  private channel: BroadcastChannel | undefined;
  private readonly lockAbort = new AbortController();
  private releaseLock: (() => void) | undefined;

  // The leader's (or a solo tab's) connection.
  private abort: AbortController | undefined;
  private watching = false; // a request or stream is open and should be producing bytes
  private lastByteAt = 0;
  private lastTickAt = 0;
  private tick: ReturnType<typeof setInterval> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private attempt = 0;
  private everLive = false;
  private parked = false;
  private resyncPending = false;
  private catchUpUntil = 0;
  private catchUpCount = 0;
  private catchUpTimer: ReturnType<typeof setTimeout> | undefined;
  private readyAt = 0;
  private liveSince = 0;
  private hasTail = true;
  private resuming = false;
  private readonly stopHearingSignIns: () => void;

  constructor(readonly siteId: string) {
    this.setState('connecting');
    this.mark();
    // A stream parked after its person closed the sign-in dialog: a sign-in in any tab brings it back.
    this.stopHearingSignIns = onSignedIn(() => {
      if (this.role === 'waiting' || !this.parked || this.closed) return;
      this.attempt = 0;
      void this.connect();
    });
    this.elect();
  }

  private elect() {
    const locks = typeof navigator !== 'undefined' ? navigator.locks : undefined;
    if (typeof BroadcastChannel !== 'function' || !locks) return this.lead('solo');
    this.channel = new BroadcastChannel(`dashboard-inbox:${this.siteId}`);
    this.channel.onmessage = (m: MessageEvent<Wire>) => this.heard(m.data);
    this.channel.postMessage({ type: 'hello' } satisfies Wire);
    let granted = false;
    locks
      .request(`dashboard-inbox:${this.siteId}`, { signal: this.lockAbort.signal }, () => {
        granted = true;
        if (this.closed) return;
        // Held until this hub closes (or the tab goes, which frees it for the next tab).
        return new Promise<void>((resolve) => {
          this.releaseLock = resolve;
          this.lead('leader');
        });
      })
      .catch(() => {
        // SecurityError where storage is refused, or our own abort at close: never wait on the lock.
        if (!this.closed && !granted) this.lead('solo');
      });
  }

  private lead(role: 'leader' | 'solo') {
    this.role = role;
    this.mark();
    if (role === 'solo') {
      this.channel?.close();
      this.channel = undefined;
    }
    addEventListener('online', this.wake);
    addEventListener('offline', this.wentOffline);
    document.addEventListener('visibilitychange', this.shown);
    this.lastTickAt = Date.now();
    this.tick = setInterval(this.check, hooks()?.tickMs ?? TICK_MS);
    void this.connect();
  }

  private mark() {
    const h = hooks();
    if (h) (h.role ??= {})[this.siteId] = this.role;
  }

  /** A message from another tab of this site. */
  private heard(m: Wire) {
    if (this.closed) return;
    if (m.type === 'hello') {
      if (this.role === 'leader') this.post({ type: 'state', state: this.state, lastId: this.lastId });
      return;
    }
    if (this.role !== 'waiting') return;
    if (m.type === 'state') {
      this.lastId = Math.max(this.lastId, m.lastId);
      this.setState(m.state);
    } else if (m.type === 'event') this.deliver(m.event);
    else if (m.type === 'catch-up') setCatchUp(m.count);
    else if (m.type === 'resync') {
      this.lastId = m.lastId;
      this.resynced();
    }
  }

  private post(m: Wire) {
    if (this.role === 'leader') this.channel?.postMessage(m);
  }

  private setState(s: ConnectionState) {
    this.state = s;
    setConnection(s);
    this.post({ type: 'state', state: s, lastId: this.lastId });
  }

  /** Each id once, in order: anything at or below the last id delivered is a repeat. */
  private deliver(e: InboxLiveEvent) {
    const n = Number(e.id);
    if (!(n > this.lastId)) return;
    this.lastId = n;
    hooks()?.events?.push(e);
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (err) {
        console.error(err); // one listener's failure must not starve the others
      }
    }
  }

  private resynced() {
    const h = hooks();
    if (h) h.resyncs = (h.resyncs ?? 0) + 1;
    for (const l of [...this.resyncListeners]) {
      try {
        l();
      } catch (err) {
        console.error(err);
      }
    }
  }

  private async connect() {
    clearTimeout(this.retryTimer);
    this.abort?.abort();
    if (this.closed) return;
    const abort = (this.abort = new AbortController());
    this.parked = false;
    this.setState(navigator.onLine === false ? 'offline' : this.everLive ? 'reconnecting' : 'connecting');
    let last: Response | undefined;
    let resumeFrom = -1;
    let response: Response;
    try {
      // Through api.ts's `send`: a 401 opens the app's sign-in dialog and this request is sent
      // again once signed in (from the last id seen by then).
      response = await send<Response>(async () => {
        resumeFrom = this.lastId;
        const headers: Record<string, string> = { Accept: 'text/event-stream' };
        if (resumeFrom >= 0) headers['Last-Event-ID'] = String(resumeFrom);
        this.watching = true;
        this.lastByteAt = Date.now();
        try {
          last = await fetch(`/manage/v1/sites/${encodeURIComponent(this.siteId)}/inbox/events`, {
            headers,
            credentials: 'same-origin',
            cache: 'no-store',
            signal: abort.signal,
          });
        } finally {
          this.watching = false;
        }
        if (last.ok) return { data: last, response: last };
        return { error: await last.json().catch(() => undefined), response: last };
      });
    } catch (err) {
      if (abort.signal.aborted || this.closed) return;
      return this.refused(err, last, resumeFrom);
    }

    const reader = response.body?.getReader();
    if (!reader) return this.retry();
    const decoder = new TextDecoder();
    const parser = createSseParser((m) => this.message(m, resumeFrom, abort));
    this.watching = true;
    this.lastByteAt = Date.now();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || abort.signal.aborted) break;
        this.lastByteAt = Date.now();
        parser.push(decoder.decode(value, { stream: true }));
      }
    } catch {
      // The network dropped, or the watchdog aborted it.
    } finally {
      if (this.abort === abort) this.watching = false;
    }
    if (abort.signal.aborted || this.closed) return; // whoever aborted it has reconnected
    this.retry(); // the server ended it: a restart, a sixth stream of this account, a deploy
  }

  /** A connection the service refused or could not answer. */
  private refused(err: unknown, answer: Response | undefined, resumeFrom: number) {
    const status = err instanceof ApiFailure ? err.status : 0;
    if (status === 400 && resumeFrom >= 0) {
      // The feed does not know our id: the position went backwards (a restored database). Start
      // at its end and let the lists reload.
      this.lastId = -1;
      this.resyncPending = true;
      this.attempt = 0;
      return void this.connect();
    }
    if (status === 401 || status === 403 || status === 404) {
      // Not signed in any more (the person closed the dialog), or no longer a member: wait for
      // them, not in a loop.
      this.parked = true;
      this.setState('offline');
      this.retryTimer = setTimeout(() => void this.connect(), PARKED_MS);
      return;
    }
    const after = Number(answer?.headers.get('Retry-After'));
    this.retry(status === 503 || status === 429 ? (Number.isFinite(after) && after > 0 ? after * 1000 : 10_000) * (1 + Math.random() / 2) : undefined);
  }

  private retry(delayMs?: number) {
    if (this.closed) return;
    this.abort?.abort();
    this.watching = false;
    clearTimeout(this.retryTimer);
    // The backoff starts over only after a stream that lasted: one the server ends at once (this
    // account's sixth stream elsewhere ending ours, over and over) keeps backing off.
    if (this.liveSince && Date.now() - this.liveSince > STABLE_MS) this.attempt = 0;
    this.liveSince = 0;
    const base = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** this.attempt);
    this.attempt++;
    const delay = delayMs ?? base / 2 + (Math.random() * base) / 2;
    this.setState(navigator.onLine === false ? 'offline' : 'reconnecting');
    this.retryTimer = setTimeout(() => void this.connect(), delay);
  }

  private message(m: SseMessage, resumeFrom: number, abort: AbortController) {
    if (abort.signal.aborted) return;
    if (m.event === 'ready') return this.ready(m, resumeFrom);
    if (m.event === 'session-ended') {
      // Reconnecting meets the 401 (the sign-in dialog) or a renewed membership check.
      this.attempt = 0;
      return void this.connect();
    }
    if (m.id === undefined || !/^\d{1,15}$/.test(m.id)) return;
    const n = Number(m.id);
    if (!NAMES.has(m.event)) {
      this.lastId = Math.max(this.lastId, n); // an event this page does not know: skip it, but resume after it
      return;
    }
    let data: unknown;
    try {
      data = JSON.parse(m.data);
    } catch {
      return;
    }
    // Without the tail (an older service), what arrives in the first moment after a resume is the backlog.
    const replayed = this.hasTail ? n <= this.catchUpUntil : this.resuming && Date.now() - this.readyAt < CATCH_UP_SETTLE_MS / 2;
    const event: InboxLiveEvent = { id: m.id, name: m.event as InboxLiveEventName, data, replayed };
    const before = this.lastId;
    this.deliver(event);
    if (this.lastId === before) return;
    this.post({ type: 'event', event });
    if (replayed) {
      this.catchUpCount++;
      if (this.hasTail && n >= this.catchUpUntil) this.endCatchUp();
    }
  }

  private ready(m: SseMessage, resumeFrom: number) {
    let r: Ready = {};
    try {
      r = JSON.parse(m.data) as Ready;
    } catch {
      // a ready without data still means the stream is open
    }
    const at = Number(r.lastEventId ?? m.id);
    const tail = r.tail === undefined ? NaN : Number(r.tail);
    this.liveSince = Date.now();
    this.everLive = true;
    this.readyAt = Date.now();
    this.hasTail = Number.isFinite(tail);
    this.catchUpCount = 0;
    this.resuming = resumeFrom >= 0;
    this.catchUpUntil = resumeFrom >= 0 && this.hasTail ? tail : 0;
    if (resumeFrom < 0 && Number.isFinite(at)) this.lastId = Math.max(this.lastId, at);
    this.setState('live');
    clearTimeout(this.catchUpTimer);
    if (resumeFrom >= 0) this.catchUpTimer = setTimeout(() => this.endCatchUp(), CATCH_UP_SETTLE_MS);
    // The feed lost what came after our id (rows past their week), or the service started over:
    // what the lists hold cannot be patched by events, they reload.
    if (r.gap === true || this.resyncPending) {
      this.resyncPending = false;
      this.post({ type: 'resync', lastId: this.lastId });
      this.resynced();
    }
  }

  private endCatchUp() {
    clearTimeout(this.catchUpTimer);
    this.catchUpUntil = 0;
    const count = this.catchUpCount;
    this.catchUpCount = 0;
    if (!count) return;
    setCatchUp(count);
    this.post({ type: 'catch-up', count });
  }

  /** The watchdog: a socket with no byte (not even a ping) for too long, or a machine that slept. */
  private check = () => {
    const now = Date.now();
    const tickMs = hooks()?.tickMs ?? TICK_MS;
    const slept = now - this.lastTickAt > 2 * tickMs + 5_000;
    this.lastTickAt = now;
    if (this.closed || this.parked) return;
    const quiet = now - this.lastByteAt;
    if (this.watching && (quiet > (hooks()?.watchdogMs ?? WATCHDOG_MS) || (slept && quiet > FRESH_MS))) {
      this.attempt = 0;
      void this.connect();
    }
  };

  /** Back online, or the tab shown again: a stream that is not surely alive is replaced now. */
  private wake = () => {
    if (this.closed) return;
    if (this.parked || !this.watching) {
      if (this.state === 'live' && !this.parked) return;
      this.attempt = 0;
      return void this.connect();
    }
    if (this.state !== 'live' || Date.now() - this.lastByteAt > FRESH_MS) {
      this.attempt = 0;
      void this.connect();
    }
  };

  private shown = () => {
    if (document.visibilityState === 'visible') this.wake();
  };

  private wentOffline = () => {
    if (!this.closed) this.setState('offline');
  };

  close() {
    this.closed = true;
    this.lockAbort.abort();
    this.releaseLock?.();
    this.abort?.abort();
    clearTimeout(this.retryTimer);
    clearTimeout(this.catchUpTimer);
    clearInterval(this.tick);
    this.stopHearingSignIns();
    removeEventListener('online', this.wake);
    removeEventListener('offline', this.wentOffline);
    document.removeEventListener('visibilitychange', this.shown);
    this.channel?.close();
    // Another site's stream (the site picker moved on) owns the header now.
    if (!hubs.size) setConnection('none');
  }
}

function hubOf(siteId: string): SiteHub {
  let hub = hubs.get(siteId);
  if (!hub) hubs.set(siteId, (hub = new SiteHub(siteId)));
  return hub;
}

function release(siteId: string, hub: SiteHub) {
  if (hub.listeners.size || hub.resyncListeners.size || hubs.get(siteId) !== hub) return;
  hubs.delete(siteId);
  hub.close();
}

export function subscribe(siteId: string, listener: (event: InboxLiveEvent) => void): () => void {
  const hub = hubOf(siteId);
  // A listener of its own: the same function subscribed twice still gets each id once per subscription.
  const own = (e: InboxLiveEvent) => listener(e);
  hub.listeners.add(own);
  return () => {
    hub.listeners.delete(own);
    // Released after this turn: an unsubscribe followed by a subscribe (a re-render) keeps the stream.
    setTimeout(() => release(siteId, hub), 0);
  };
}

export function subscribeResync(siteId: string, listener: () => void): () => void {
  const hub = hubOf(siteId);
  const own = () => listener();
  hub.resyncListeners.add(own);
  return () => {
    hub.resyncListeners.delete(own);
    setTimeout(() => release(siteId, hub), 0);
  };
}

/** Whether this tab reads the site's stream itself (the leader, or a tab without the lock): it is the one that notifies. */
export function readsStream(siteId: string): boolean {
  const role = hubs.get(siteId)?.role;
  return role === 'leader' || role === 'solo';
}

/**
 * Whether this tab should speak for new messages: it reads some site's stream itself, or it has no
 * stream at all. A tab that only hears another tab's relay stays quiet, so several tabs (and several
 * callers of `announce`) never beep or notify more than once.
 */
export function speaksForStreams(): boolean {
  if (!hubs.size) return true;
  for (const hub of hubs.values()) if (hub.role !== 'waiting') return true;
  return false;
}
