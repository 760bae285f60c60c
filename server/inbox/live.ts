import type { EventChannel } from '../delivery/channel';
import { createSignalListeners, type SignalListener } from '../window/live';
import type { InboxStore } from './store';

type Listener = () => void;

/**
 * Wakes the inbox streams of a site when its feed may have moved. The event channel tells of every
 * commit of this process and, with Redis, of the others (public events and the inbox's own
 * notices alike); a poll of the watched sites' feed positions (one primary-key read for all of
 * them) covers what the channel does not carry: no Redis, Redis away, or the CLI writing.
 */
export function createInboxHub(
  store: Pick<InboxStore, 'tails'>,
  opts: { channel?: Pick<EventChannel, 'subscribe' | 'live'>; pollMs?: number; safetyPollMs?: number } = {},
) {
  const pollMs = opts.pollMs ?? 1000;
  const safetyPollMs = opts.safetyPollMs ?? 5000;
  const listeners = new Map<string, Set<Listener>>();
  const seen = new Map<string, number>();
  let timer: NodeJS.Timeout | null = null;
  let lastPollAt = 0;
  let polling = false;

  function wake(siteId: string) {
    for (const listener of listeners.get(siteId) ?? []) {
      try {
        listener();
      } catch {
        // one stream's failure is its own
      }
    }
  }

  async function poll() {
    if (polling || !listeners.size) return;
    polling = true;
    lastPollAt = Date.now();
    try {
      const tails = await store.tails([...listeners.keys()]);
      for (const [site, position] of tails) {
        if (seen.get(site) !== position) {
          seen.set(site, position);
          wake(site);
        }
      }
    } catch {
      // the database is away; the next tick asks again
    } finally {
      polling = false;
    }
  }

  /** site -> the streams' takers of signals meant for its members (the visitor or a member typing) */
  const signalListeners = createSignalListeners();

  // Stored changes (outbox events, inbox feed rows) wake the site's streams to read; signals are
  // written to them as they are.
  opts.channel?.subscribe(
    (messages) => {
      if (!messages) return void poll();
      const woken = new Set<string>();
      for (const m of messages) {
        if (m.kind !== 'signal') woken.add(m.siteId);
        else if (m.to === 'members') signalListeners.tell(m.siteId, { event: m.event, data: m.data });
      }
      for (const site of woken) wake(site);
    },
    ['event', 'inbox', 'signal'],
  );

  return {
    /** Calls `listener` when the site's inbox may have news; returns the unsubscribe. */
    subscribe(siteId: string, listener: Listener): () => void {
      let set = listeners.get(siteId);
      if (!set) listeners.set(siteId, (set = new Set()));
      set.add(listener);
      if (!timer) {
        timer = setInterval(() => {
          if (opts.channel?.live() && Date.now() - lastPollAt < safetyPollMs) return;
          void poll();
        }, pollMs);
        timer.unref();
      }
      return () => {
        set!.delete(listener);
        if (set!.size) return;
        listeners.delete(siteId);
        seen.delete(siteId);
        if (!listeners.size && timer) {
          clearInterval(timer);
          timer = null;
        }
      };
    },
    /** Wakes a site's streams now (this process's own private changes, after their commit). */
    wake,
    /** Calls `listener` with each signal meant for the site's members (none is stored); returns the unsubscribe. */
    subscribeSignals: (siteId: string, listener: SignalListener) => signalListeners.subscribe(siteId, listener),
  };
}

export type InboxHub = ReturnType<typeof createInboxHub>;
