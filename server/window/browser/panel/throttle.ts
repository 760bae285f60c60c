/**
 * At most one call every `intervalMs`, the last one asked for never lost: a call asked for within
 * the interval waits for its end, and a later ask replaces it (only the newest state matters: the
 * page the visitor is on now). Pure, with the clock and timers passed in, so the unit tier checks
 * it without waiting (test/window/context-throttle.unit.test.ts).
 */
export interface ThrottleClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const browserClock: ThrottleClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export function createThrottle(intervalMs: number, clock: ThrottleClock = browserClock) {
  let last = -Infinity;
  let pending: (() => void) | null = null;
  let timer: unknown = null;

  const fire = () => {
    timer = null;
    const run = pending;
    pending = null;
    if (!run) return;
    last = clock.now();
    run();
  };

  return {
    /** Runs `fn` now if the interval since the last run is over, else at its end (replacing what waited). */
    request(fn: () => void) {
      pending = fn;
      if (timer !== null) return;
      const wait = last + intervalMs - clock.now();
      if (wait <= 0) fire();
      else timer = clock.setTimeout(fire, wait);
    },
    /** Drops what waits (the conversation closed, the session ended). */
    cancel() {
      pending = null;
      if (timer !== null) clock.clearTimeout(timer);
      timer = null;
    },
  };
}
