/**
 * Sliding-window counters for budgets spent in amounts (bytes of uploads, messages an hour): the
 * count of the current fixed window plus the previous window's count weighted by how much of it
 * the sliding window still covers. Two numbers per bucket, whatever the traffic, and no burst of
 * twice the limit at a window's edge as a plain fixed window would allow. Pure: the clock is passed in.
 */

/** What a bucket holds: the counts of window `index` (current) and of `index - 1` (previous). */
export interface WindowCounts {
  index: number;
  previous: number;
  current: number;
}

export const EMPTY_COUNTS: WindowCounts = { index: 0, previous: 0, current: 0 };

/** The fixed window `now` falls in, and how far into it (0 to 1). */
export function windowAt(now: number, windowMs: number): { index: number; elapsed: number } {
  const index = Math.floor(now / windowMs);
  return { index, elapsed: (now - index * windowMs) / windowMs };
}

/** `counts` moved to the window of `now`: an older current window becomes the previous one, or both are forgotten. */
export function rolled(counts: WindowCounts, now: number, windowMs: number): WindowCounts {
  const { index } = windowAt(now, windowMs);
  if (counts.index === index) return counts;
  if (counts.index === index - 1) return { index, previous: counts.current, current: 0 };
  return { index, previous: 0, current: 0 };
}

/** The part of the previous window's count still inside the sliding window (rounded up: never under-counted). */
export function previousWeight(now: number, windowMs: number): number {
  return 1 - windowAt(now, windowMs).elapsed;
}

/** What the sliding window holds at `now`. */
export function used(counts: WindowCounts, now: number, windowMs: number): number {
  const c = rolled(counts, now, windowMs);
  return Math.ceil(c.previous * previousWeight(now, windowMs)) + c.current;
}

export interface SpendDecision {
  allowed: boolean;
  /** The counts after the decision (unchanged when refused). */
  counts: WindowCounts;
  /** What the window holds after the decision. */
  used: number;
  /** Whole seconds until `amount` would fit (0 when allowed; at least 1 otherwise). */
  retryAfterSeconds: number;
}

/** Takes `amount` from a budget of `limit` per `windowMs` when it fits. */
export function spend(counts: WindowCounts, amount: number, limit: number, now: number, windowMs: number): SpendDecision {
  const c = rolled(counts, now, windowMs);
  const before = used(c, now, windowMs);
  if (before + amount <= limit) {
    const after = { ...c, current: c.current + amount };
    return { allowed: true, counts: after, used: before + amount, retryAfterSeconds: 0 };
  }
  return { allowed: false, counts: c, used: before, retryAfterSeconds: secondsUntilFits(c, amount, limit, now, windowMs) };
}

/**
 * When `amount` fits again with nothing else spent: the previous window's share shrinks linearly
 * until the window ends, then the current count becomes the one that shrinks. An amount over the
 * whole limit never fits; it is told to come back after two windows, when nothing counted now is left.
 */
export function secondsUntilFits(counts: WindowCounts, amount: number, limit: number, now: number, windowMs: number): number {
  const c = rolled(counts, now, windowMs);
  const { index } = windowAt(now, windowMs);
  const windowEnd = (index + 1) * windowMs;
  const room = limit - amount;
  let at: number;
  if (room < 0) at = windowEnd + windowMs;
  else if (c.current <= room && c.previous > 0) {
    // within this window: previous * (1 - elapsed) <= room - current
    at = index * windowMs + windowMs * (1 - (room - c.current) / c.previous);
  } else if (c.current <= room) at = now;
  else at = windowEnd + windowMs * (1 - room / c.current);
  let seconds = Math.max(1, Math.ceil((at - now) / 1000));
  // At an exact second the weighted share can come out a hair above the room in floating point
  // (and `used` rounds it up): the answer is the first whole second at which `used` agrees.
  while (room >= 0 && used(c, now + seconds * 1000, windowMs) > room) seconds++;
  return seconds;
}

/** Gives back `amount` that was spent in window `index` (a refund that is not needed any more); never below zero. */
export function refunded(counts: WindowCounts, index: number, amount: number): WindowCounts {
  if (counts.index === index) return { ...counts, current: Math.max(0, counts.current - amount) };
  if (counts.index === index + 1) return { ...counts, previous: Math.max(0, counts.previous - amount) };
  return counts;
}
