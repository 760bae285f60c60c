import type { CommittedEvent, EventChannel, LiveSignal } from '../delivery/channel';
import type { EventStore } from '../webhooks/store';

/** The event store's reads the hub's poll makes. */
export type LiveEventSource = Pick<EventStore, 'recentEventCounts' | 'recentEvents' | 'visitorsOfEvents'>;

export interface LiveOptions {
  /** How often the database is asked whether another process wrote events on a watched site, while the channel does not carry them. */
  pollMs?: number;
  /** The same question while the channel carries other processes' events: only a safety net then. */
  safetyPollMs?: number;
  /** How far back that question looks (a transaction slower than this is caught by the streams' own heartbeat read). */
  lookBackMs?: number;
  /** Where committed events are heard of, from this process and (with Redis) the others. */
  channel?: Pick<EventChannel, 'subscribe' | 'live'>;
  now?: () => number;
}

type Listener = () => void;
/** Takes an ephemeral event (no id: nothing to resume from) for a stream to write as it is. */
export type SignalListener = (e: { event: string; data: unknown }) => void;

/** The streams that take signals, by a key of their hub's (a visitor of a site, a site). */
export function createSignalListeners() {
  const byKey = new Map<string, Set<SignalListener>>();
  return {
    tell(key: string, e: { event: string; data: unknown }) {
      for (const listener of byKey.get(key) ?? []) {
        try {
          listener(e);
        } catch {
          // one stream's failure is its own
        }
      }
    },
    /** Returns the unsubscribe. */
    subscribe(key: string, listener: SignalListener): () => void {
      let set = byKey.get(key);
      if (!set) byKey.set(key, (set = new Set()));
      set.add(listener);
      return () => {
        set!.delete(listener);
        if (!set!.size) byKey.delete(key);
      };
    },
  };
}

/** Beyond this many watched sites the poll asks across all sites rather than list them in its statement. */
const LISTED_SITES = 200;

/**
 * Wakes the chat window's live streams of one visitor when an event of that visitor was committed,
 * so the cost of an event does not grow with the streams open on its site. Two sources:
 *
 * - the event channel (`committed(events)`): every commit of this process, and with Redis of every
 *   other process, says which site and visitor each event belongs to, no read at all;
 * - a poll for what the channel does not carry (no Redis, or Redis away, while the CLI,
 *   `npm run worker` or another instance writes): every `pollMs`, or only every `safetyPollMs`
 *   while the channel carries other processes' events. One grouped count of the recent events of
 *   the watched sites, compared with the events this hub already knows of; only when they differ
 *   are the new events' ids read, and the visitor of each event not seen before, once per poll
 *   whatever the number of streams. A site's first look learns the ids of its recent events and
 *   wakes its streams (just opened) once instead. When the channel says events may have been
 *   missed (Redis came back), the poll runs at once.
 *
 * A woken stream reads its own feed, which is exact; a spurious wake costs one cheap read. The
 * streams' heartbeat re-read stays the safety net for anything outside the look-back window.
 */
export function createLiveHub(store: LiveEventSource, opts: LiveOptions = {}) {
  const pollMs = opts.pollMs ?? 500;
  const safetyPollMs = opts.safetyPollMs ?? 5_000;
  const lookBackMs = opts.lookBackMs ?? 10_000;
  const now = opts.now ?? Date.now;
  /** site -> visitor -> the wake-ups of that visitor's streams */
  const listeners = new Map<string, Map<string, Set<Listener>>>();
  /** site -> event id -> created_at: the watched sites' events of the look-back window this hub knows of */
  const known = new Map<string, Map<string, number>>();
  /** Watched sites the poll has not looked at yet: it learns their recent events and wakes their few streams once. */
  const firstLook = new Set<string>();
  let timer: NodeJS.Timeout | null = null;
  let checking = false;
  let again = false;
  let lastCheckAt = 0;

  /** Adds the listeners an event of `visitorId` wakes (all of the site's when the visitor is unknown). */
  function collect(siteId: string, visitorId: string | null, into: Set<Listener>) {
    const site = listeners.get(siteId);
    if (!site) return;
    const sets = visitorId === null ? [...site.values()] : [site.get(visitorId)];
    for (const set of sets) for (const listener of set ?? []) into.add(listener);
  }

  function wakeAll(woken: Set<Listener>) {
    for (const listener of woken) {
      try {
        listener();
      } catch {
        // one stream's failure is its own; the others are still woken
      }
    }
  }

  function remember(e: { id: string; siteId: string; createdAt: number }) {
    known.get(e.siteId)?.set(e.id, e.createdAt);
  }

  /** Drops what fell out of the window; the count and newest time of what is left. */
  function knownSince(siteId: string, since: number): { count: number; newest: number } {
    const events = known.get(siteId);
    let newest = 0;
    if (!events) return { count: 0, newest };
    for (const [id, at] of events) {
      if (at < since) events.delete(id);
      else newest = Math.max(newest, at);
    }
    return { count: events.size, newest };
  }

  async function check() {
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    lastCheckAt = Date.now();
    try {
      do {
        again = false;
        const sites = [...listeners.keys()];
        if (!sites.length) break;
        const since = now() - lookBackMs;
        try {
          const first = sites.filter((site) => firstLook.has(site));
          const counts = await store.recentEventCounts(sites.length <= LISTED_SITES ? sites : null, since);
          const changed = sites.filter((site) => {
            if (firstLook.has(site)) return false;
            const mine = knownSince(site, since);
            const theirs = counts.get(site) ?? { count: 0, newest: 0 };
            return mine.count !== theirs.count || (theirs.count > 0 && mine.newest !== theirs.newest);
          });
          if (!changed.length && !first.length) continue;
          const fresh = (await store.recentEvents([...first, ...changed], since)).filter((e) => !known.get(e.siteId)?.has(e.id));
          const routed = fresh.filter((e) => !firstLook.has(e.siteId));
          const visitors = routed.length ? await store.visitorsOfEvents(routed.map((e) => e.id)) : new Map<string, string | null>();
          const woken = new Set<Listener>();
          for (const e of fresh) remember(e);
          for (const e of routed) collect(e.siteId, visitors.get(e.id) ?? null, woken);
          // A site's first look learns its window without reading bodies; its streams (just opened,
          // usually one) each read once in case something came between their first read and now.
          for (const site of first) {
            firstLook.delete(site);
            collect(site, null, woken);
          }
          wakeAll(woken);
        } catch {
          break; // the database is away; the next tick asks again
        }
      } while (again);
    } finally {
      checking = false;
    }
  }

  /** A tick of the poll: skipped while the channel carries other processes' events, unless a site waits for its first look or the safety poll is due. */
  function tick() {
    if (opts.channel?.live() && !firstLook.size && Date.now() - lastCheckAt < safetyPollMs) return;
    void check();
  }

  function schedule() {
    if (timer || !listeners.size) return;
    timer = setInterval(tick, pollMs);
    timer.unref();
  }

  /** Commits of this process or another: wake their visitors' streams now, reading nothing. */
  function committed(events: readonly CommittedEvent[]) {
    const woken = new Set<Listener>();
    for (const e of events) {
      remember(e);
      collect(e.siteId, e.visitorId, woken);
    }
    wakeAll(woken);
  }

  /** site + visitor -> the streams' takers of signals meant for the visitor (an agent typing) */
  const signalListeners = createSignalListeners();
  const signalKey = (siteId: string, visitorId: string) => `${siteId} ${visitorId}`;

  function signalled(signals: readonly LiveSignal[]) {
    for (const s of signals) if (s.to === 'visitor') signalListeners.tell(signalKey(s.siteId, s.visitorId), { event: s.event, data: s.data });
  }

  // Outbox events wake streams to read; signals are written to them as they are. Inbox feed rows
  // are the members' alone.
  opts.channel?.subscribe(
    (messages) => {
      if (!messages) return void check();
      const events = messages.filter((m): m is CommittedEvent => m.kind === 'event');
      if (events.length) committed(events);
      signalled(messages.filter((m): m is LiveSignal => m.kind === 'signal'));
    },
    ['event', 'signal'],
  );

  return {
    /** Calls `listener` when the visitor may have news on the site; returns the unsubscribe. */
    subscribe(siteId: string, visitorId: string, listener: Listener): () => void {
      let site = listeners.get(siteId);
      if (!site) {
        listeners.set(siteId, (site = new Map()));
        known.set(siteId, new Map());
        firstLook.add(siteId);
      }
      let set = site.get(visitorId);
      if (!set) site.set(visitorId, (set = new Set()));
      set.add(listener);
      schedule();
      return () => {
        set!.delete(listener);
        if (set!.size) return;
        site!.delete(visitorId);
        if (site!.size) return;
        listeners.delete(siteId);
        known.delete(siteId);
        firstLook.delete(siteId);
        if (!listeners.size && timer) {
          clearInterval(timer);
          timer = null;
        }
      };
    },

    /** These events were committed (the channel calls it): wake their visitors' streams now, reading nothing. */
    committed,

    /** Calls `listener` with each signal meant for the visitor (none is stored); returns the unsubscribe. */
    subscribeSignals: (siteId: string, visitorId: string, listener: SignalListener) => signalListeners.subscribe(signalKey(siteId, visitorId), listener),

    watchedSites: () => listeners.size,
  };
}

export type LiveHub = ReturnType<typeof createLiveHub>;
