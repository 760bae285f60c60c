import type { Redis } from 'ioredis';
import { closeRedis } from '../../platform/redis';
import { createMemoryLimiter, createRedisLimiter, RateLimiter, Reservation } from './limiter';

interface LimiterLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface FailOpenOptions {
  limit: number;
  logger: LimiterLogger;
  prefix?: string;
  /** At most one "Redis unavailable" warning per this many ms; the others are counted in it. */
  warnEveryMs?: number;
  /** After a failed command on a connection that still looks ready, skip Redis this long. */
  coolDownMs?: number;
  /** Strings never to write to the log (the password of REDIS_URL). */
  secrets?: string[];
  now?: () => number;
}

/**
 * Rate limits in Redis, failing open to this process's own sliding window while Redis is away.
 *
 * The decision (issue 7, defect 3): a rate-limit store outage must not take the API down, and the
 * limits still hold per instance, so falling back beats answering 503 to every client. While Redis
 * is known to be down (ioredis not `ready`, or a command just failed) requests go straight to memory
 * without touching it; when ioredis reports `ready` again the shared window is used again.
 */
export function createFailOpenLimiter(redis: Redis, opts: FailOpenOptions): RateLimiter {
  const now = opts.now ?? Date.now;
  const warnEveryMs = opts.warnEveryMs ?? 30_000;
  const coolDownMs = opts.coolDownMs ?? 1000;
  const shared = createRedisLimiter(redis, opts.limit, opts.prefix);
  const local = createMemoryLimiter(opts.limit, now);

  let failedAt: number | null = null; // set while degraded: the last time Redis failed us
  let probing = false;
  let down = false; // a warning was logged and no "ready" since
  let lastWarnAt = -Infinity;
  let suppressed = 0;

  const scrub = (text: string) => (opts.secrets ?? []).filter(Boolean).reduce((t, s) => t.split(s).join('[redacted]'), text);

  function reportFailure(err: unknown) {
    down = true;
    const t = now();
    if (t - lastWarnAt < warnEveryMs) {
      suppressed++;
      return;
    }
    lastWarnAt = t;
    // Only message and code: a ReplyError carries the command and its arguments (AUTH's password).
    const e = err as { message?: string; code?: string };
    opts.logger.warn(
      { component: 'rate-limit', reason: { message: scrub(String(e?.message ?? err)), code: e?.code }, suppressedWarnings: suppressed },
      "Redis unavailable: rate limits fall back to this instance's memory (each instance counts alone) until it returns",
    );
    suppressed = 0;
  }

  let closing = false;
  // Without a listener ioredis prints every reconnect failure to stderr, URL included.
  redis.on('error', reportFailure);
  redis.on('close', () => {
    if (!closing) reportFailure(new Error('connection to Redis lost; reconnecting'));
  });
  redis.on('ready', () => {
    failedAt = null;
    opts.logger.info(
      { component: 'rate-limit' },
      down ? 'Redis ready again: rate limits are shared across instances again' : 'Redis ready: rate limits are shared across instances',
    );
    down = false;
  });

  /** Whether this request should ask Redis, and whether it is the one probe after a failure. */
  function route(): 'shared' | 'probe' | 'local' {
    if (redis.status !== 'ready') return 'local';
    if (failedAt === null) return 'shared';
    if (probing || now() - failedAt < coolDownMs) return 'local';
    return 'probe';
  }

  async function attempt<T>(viaRedis: () => Promise<T>, viaMemory: () => Promise<T>): Promise<T> {
    const way = route();
    if (way === 'local') return viaMemory();
    if (way === 'probe') probing = true;
    try {
      const result = await viaRedis();
      if (failedAt !== null) {
        failedAt = null;
        opts.logger.info({ component: 'rate-limit' }, 'Redis answers again: rate limits are shared across instances again');
        down = false;
      }
      return result;
    } catch (err) {
      failedAt = now();
      reportFailure(err);
      return viaMemory();
    } finally {
      if (way === 'probe') probing = false;
    }
  }

  return {
    hit: (bucket) =>
      attempt(
        () => shared.hit(bucket),
        () => local.hit(bucket),
      ),
    reserve: (bucket): Promise<Reservation> =>
      attempt(
        () => shared.reserve(bucket),
        () => local.reserve(bucket),
      ),
    spend: (bucket, amount, limit, windowMs) =>
      attempt(
        () => shared.spend(bucket, amount, limit, windowMs),
        () => local.spend(bucket, amount, limit, windowMs),
      ),
    backend: () => (route() === 'local' ? 'local' : 'shared'),
    close: () => {
      closing = true;
      return closeRedis(redis);
    },
  };
}
