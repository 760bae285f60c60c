/** The timers a batcher waits with; tests pass a fake clock's. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface ResultBatcherOptions<T> {
  /** How long the first item of a group waits for others before it is flushed. */
  gatherMs: number;
  /** Items in one flush at most; this many waiting are flushed at once. */
  maxPerFlush: number;
  /** Writes one group; it should not throw (a rejection is passed to `onError`, and the group is dropped). */
  flush: (group: T[]) => Promise<void>;
  /** Every waiting item is flushed (called only while not stopped). */
  onIdle?: () => void;
  onError?: (err: unknown, group: T[]) => void;
  timers?: Timers;
}

/**
 * Gathers items (the delivery worker's attempt results) and flushes them in groups: the first item
 * waits `gatherMs` for others, a full group goes at once, and items that arrive while a flush runs
 * go with the next one, so there is one flush at a time. After `stop()` every item is flushed at once.
 */
export function createResultBatcher<T>(opts: ResultBatcherOptions<T>) {
  const timers = opts.timers ?? realTimers;
  const pending: T[] = [];
  let flushing: Promise<void> | null = null;
  let gathering: unknown;
  let stopped = false;

  function start() {
    if (gathering !== undefined) timers.clearTimeout(gathering);
    gathering = undefined;
    flushing ??= run();
  }

  async function run(): Promise<void> {
    while (pending.length > 0) {
      const group = pending.splice(0, opts.maxPerFlush);
      try {
        await opts.flush(group);
      } catch (err) {
        opts.onError?.(err, group);
      }
    }
    flushing = null;
    if (!stopped) opts.onIdle?.();
  }

  return {
    get size() {
      return pending.length;
    },
    add(item: T): void {
      pending.push(item);
      if (flushing) return; // the running flush takes it next
      if (pending.length >= opts.maxPerFlush || stopped) return start();
      gathering ??= timers.setTimeout(start, opts.gatherMs);
    },
    /** From now on every item is flushed at once; the ones waiting go now. */
    stop(): void {
      stopped = true;
      if (pending.length > 0) start();
    },
    /** Resolves when no flush runs (the one running now, and those it takes on, have ended). */
    async idle(): Promise<void> {
      while (flushing) await flushing;
    },
  };
}

export type ResultBatcher<T> = ReturnType<typeof createResultBatcher<T>>;
