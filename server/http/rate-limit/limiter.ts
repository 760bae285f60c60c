import type { Redis } from 'ioredis';
import { closeRedis } from '../../platform/redis';
import { EMPTY_COUNTS, previousWeight, refunded, secondsUntilFits, spend, used, WindowCounts, windowAt } from './window';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (a slot frees). */
  resetSeconds: number;
}

/** A counted request that can be taken back out of the window (see `reserve`). */
export interface Reservation extends RateDecision {
  /** Removes this one request from the window; never throws. A no-op when it was not counted. */
  release(): Promise<void>;
}

export interface RateLimiter {
  /** Counts a request in `bucket` when it is under the limit. */
  hit(bucket: string): Promise<RateDecision>;
  /**
   * Counts like `hit`, and lets the caller take the request back once it proves not to need
   * counting. The per-client-IP limit uses it: a key lookup holds a slot while it runs, so the
   * number of lookups one client IP can start is bounded even when it sends them all at once.
   */
  reserve(bucket: string): Promise<Reservation>;
  /**
   * Takes `amount` from a budget of `limit` per `windowMs` in `bucket` when it fits (a sliding-window
   * counter, see window.ts): bytes of visitor uploads an hour, messages an hour. What turns out not
   * to be needed can be given back with `refund`.
   */
  spend(bucket: string, amount: number, limit: number, windowMs: number): Promise<Spent>;
  /** Where the counts live right now: shared across instances (Redis) or this process only. */
  backend?(): 'shared' | 'local';
  close?(): Promise<void>;
}

/** The answer to `spend`. */
export interface Spent {
  allowed: boolean;
  /** What the window holds after this decision. */
  used: number;
  /** Whole seconds until the amount would fit (0 when allowed). */
  retryAfterSeconds: number;
  /** Gives back up to the amount taken (nothing when refused); never throws. */
  refund(amount: number): Promise<void>;
}

const released = async () => {};

/** A spend's refund: at most what was taken, once in total. */
function refundOf(taken: number, giveBack: (amount: number) => Promise<void>): (amount: number) => Promise<void> {
  let left = taken;
  return async (amount) => {
    const n = Math.min(left, Math.max(0, Math.floor(amount)));
    if (n <= 0) return;
    left -= n;
    await giveBack(n);
  };
}

const WINDOW_MS = 60_000;

function decision(allowed: boolean, limit: number, count: number, oldest: number, now: number): RateDecision {
  const reset = Math.max(1, Math.ceil((oldest + WINDOW_MS - now) / 1000));
  return { allowed, limit, remaining: Math.max(0, limit - count), resetSeconds: reset };
}

/** A counted request whose slot can be given back once (a second release does nothing). */
function reservation(d: RateDecision, giveBack: () => Promise<void>): Reservation {
  let done = false;
  return {
    ...d,
    async release() {
      if (done) return;
      done = true;
      await giveBack();
    },
  };
}

/**
 * Sliding-window log in process memory: exact, at most `limit` timestamps per bucket. Suits a
 * single instance; with REDIS_URL set the Redis limiter below shares one budget across instances.
 */
export function createMemoryLimiter(limit: number, now: () => number = Date.now): RateLimiter {
  const buckets = new Map<string, number[]>();
  const budgets = new Map<string, { counts: WindowCounts; windowMs: number }>();
  let lastSweep = now();
  function count(bucket: string): { decision: RateDecision; at: number | null } {
    const t = now();
    if (t - lastSweep > WINDOW_MS) {
      // Forget idle buckets so memory follows active keys, not every key ever seen.
      for (const [k, log] of buckets) if (!log.length || log[log.length - 1] <= t - WINDOW_MS) buckets.delete(k);
      for (const [k, b] of budgets) if (b.counts.index < windowAt(t, b.windowMs).index - 1) budgets.delete(k);
      lastSweep = t;
    }
    const log = buckets.get(bucket) ?? [];
    while (log.length && log[0] <= t - WINDOW_MS) log.shift();
    const allowed = log.length < limit;
    if (allowed) log.push(t);
    buckets.set(bucket, log);
    return { decision: decision(allowed, limit, log.length, log[0] ?? t, t), at: allowed ? t : null };
  }
  return {
    async hit(bucket) {
      return count(bucket).decision;
    },
    async reserve(bucket) {
      const { decision: d, at } = count(bucket);
      if (at === null) return { ...d, release: released };
      return reservation(d, async () => {
        // Equal timestamps are interchangeable, so dropping the last one equal to ours is exact.
        const log = buckets.get(bucket);
        const i = log ? log.lastIndexOf(at) : -1;
        if (log && i >= 0) log.splice(i, 1);
      });
    },
    async spend(bucket, amount, budgetLimit, windowMs) {
      const t = now();
      const d = spend(budgets.get(bucket)?.counts ?? EMPTY_COUNTS, amount, budgetLimit, t, windowMs);
      budgets.set(bucket, { counts: d.counts, windowMs });
      if (!d.allowed) return { allowed: false, used: d.used, retryAfterSeconds: d.retryAfterSeconds, refund: released };
      const index = d.counts.index;
      const refund = refundOf(amount, async (n) => {
        const b = budgets.get(bucket);
        if (b) b.counts = refunded(b.counts, index, n);
      });
      return { allowed: true, used: d.used, retryAfterSeconds: 0, refund };
    },
    backend: () => 'local',
  };
}

// One round trip, atomic: drop old entries, count, add when under the limit. The clock is Redis's
// own (TIME), so instances with skewed clocks still share one window.
const SLIDING_WINDOW_LUA = `
local key = KEYS[1]
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local member = ARGV[3]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, now, member)
  count = count + 1
  allowed = 1
end
redis.call('PEXPIRE', key, window)
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local oldestScore = now
if oldest[2] then oldestScore = tonumber(oldest[2]) end
return {allowed, count, oldestScore, now}
`;

// The budget of window.ts's `spend` in one atomic round trip: the counts of the previous and the
// current window, the same decision (previous share rounded up, plus current, plus amount, within
// the limit), then the amount added to the current window, which lives for two windows.
const SPEND_LUA = `
local previous = tonumber(redis.call('GET', KEYS[1]) or '0')
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local weight = tonumber(ARGV[1])
local amount = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
if math.ceil(previous * weight) + current + amount <= limit then
  current = redis.call('INCRBY', KEYS[2], amount)
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return {1, previous, current}
end
return {0, previous, current}
`;

// A refund never takes a counter below zero, nor brings back one that expired.
const REFUND_LUA = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current <= 0 then return 0 end
local n = math.min(current, tonumber(ARGV[1]))
return redis.call('DECRBY', KEYS[1], n)
`;

export function createRedisLimiter(redis: Redis, limit: number, prefix = 'chat:ratelimit:'): RateLimiter {
  let seq = 0;
  async function count(bucket: string) {
    const member = `${process.pid}:${Date.now()}:${seq++}:${Math.random()}`;
    const [allowed, count, oldest, now] = (await redis.eval(SLIDING_WINDOW_LUA, 1, prefix + bucket, WINDOW_MS, limit, member)) as number[];
    return { decision: decision(allowed === 1, limit, count, Number(oldest), Number(now)), member: allowed === 1 ? member : null };
  }
  return {
    async hit(bucket) {
      return (await count(bucket)).decision;
    },
    async reserve(bucket) {
      const { decision: d, member } = await count(bucket);
      if (member === null) return { ...d, release: released };
      // Best effort: if Redis is gone the entry simply expires with the window.
      return reservation(d, () =>
        redis.zrem(prefix + bucket, member).then(
          () => undefined,
          () => undefined,
        ),
      );
    },
    async spend(bucket, amount, budgetLimit, windowMs) {
      // This process's clock picks the window: over windows of an hour or a day, the skew between
      // instances is noise.
      const t = Date.now();
      const { index } = windowAt(t, windowMs);
      // One hash tag for both keys: a Redis Cluster keeps them in one slot, as a script needs.
      const key = (i: number) => `${prefix}budget:{${bucket}:${windowMs}}:${i}`;
      const [allowed, previous, current] = (await redis.eval(
        SPEND_LUA,
        2,
        key(index - 1),
        key(index),
        previousWeight(t, windowMs),
        amount,
        budgetLimit,
        2 * windowMs,
      )) as number[];
      const counts: WindowCounts = { index, previous: Number(previous), current: Number(current) };
      const usedNow = used(counts, t, windowMs);
      if (allowed !== 1)
        return { allowed: false, used: usedNow, retryAfterSeconds: secondsUntilFits(counts, amount, budgetLimit, t, windowMs), refund: released };
      // Best effort, like a reservation's release: a lost refund only makes the budget stricter.
      const refund = refundOf(amount, (n) =>
        redis.eval(REFUND_LUA, 1, key(index), n).then(
          () => undefined,
          () => undefined,
        ),
      );
      return { allowed: true, used: usedNow, retryAfterSeconds: 0, refund };
    },
    backend: () => 'shared',
    async close() {
      await closeRedis(redis);
    },
  };
}
