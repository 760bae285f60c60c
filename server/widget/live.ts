import type { WindowStore } from './store';

export interface LiveOptions {
  /** How often the database is asked whether another process wrote to a watched site. */
  pollMs?: number;
  /** How far back that question looks (a transaction slower than this is caught by the streams' own heartbeat read). */
  lookBackMs?: number;
  now?: () => number;
}

type Listener = () => void;

/**
 * Wakes the chat window's live streams when something happened on their site. Two sources:
 * `poke()` after every commit in this process that wrote events (the services' onEvents hook), and
 * a short poll for writes by other processes (the CLI, `npm run worker`, another instance). Both
 * run one grouped query over the `events` outbox for the watched sites only and wake the streams of
 * the sites whose recent events changed, so the cost does not grow with the number of streams. The
 * streams then read their own feed, which is exact; a spurious wake costs one cheap read.
 */
export function createLiveHub(store: WindowStore, opts: LiveOptions = {}) {
  const pollMs = opts.pollMs ?? 500;
  const lookBackMs = opts.lookBackMs ?? 10_000;
  const now = opts.now ?? Date.now;
  const listeners = new Map<string, Set<Listener>>();
  let seen = new Map<string, string>();
  let timer: NodeJS.Timeout | null = null;
  let checking = false;
  let again = false;

  async function check() {
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    try {
      do {
        again = false;
        const sites = [...listeners.keys()];
        if (!sites.length) break;
        let current: Map<string, string>;
        try {
          current = await store.recentEventSignatures(sites, now() - lookBackMs);
        } catch {
          break; // the database is away; the next tick asks again
        }
        for (const site of sites) {
          if ((current.get(site) ?? '') !== (seen.get(site) ?? '')) for (const l of listeners.get(site) ?? []) l();
        }
        seen = current;
      } while (again);
    } finally {
      checking = false;
    }
  }

  function schedule() {
    if (timer || !listeners.size) return;
    timer = setInterval(() => void check(), pollMs);
    timer.unref();
  }

  return {
    /** Calls `listener` when the site may have news; returns the unsubscribe. */
    subscribe(siteId: string, listener: Listener): () => void {
      let set = listeners.get(siteId);
      if (!set) listeners.set(siteId, (set = new Set()));
      set.add(listener);
      schedule();
      return () => {
        set!.delete(listener);
        if (!set!.size) listeners.delete(siteId);
        if (!listeners.size && timer) {
          clearInterval(timer);
          timer = null;
        }
      };
    },
    /** A commit in this process wrote events: look now rather than at the next tick. */
    poke() {
      if (listeners.size) setImmediate(() => void check());
    },
    watchedSites: () => listeners.size,
  };
}

export type LiveHub = ReturnType<typeof createLiveHub>;
