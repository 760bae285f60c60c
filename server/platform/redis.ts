import type { Redis, RedisOptions } from 'ioredis';

/**
 * ioredis settings shared by every user of Redis here (the rate limiter, the delivery workers'
 * wake-ups): a caller never waits for Redis longer than one short command time-out, never behind a
 * reconnect, and nothing is queued or replayed while it is away.
 */
export const FAIL_FAST_REDIS_OPTIONS: RedisOptions = {
  // While disconnected a command fails at once ("Stream isn't writeable ...") instead of queueing.
  enableOfflineQueue: false,
  // A Redis that accepts the connection but does not answer (paused, overloaded, black-holed).
  commandTimeout: 300,
  // Commands in flight when the connection drops are rejected at the drop, not replayed later: a
  // rate-limit hit has already been counted in memory by then, so a replay would count it twice.
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  connectTimeout: 2000,
  // Keep trying for ever, at most every 2 s, so Redis comes back by itself.
  retryStrategy: (attempt: number) => Math.min(attempt * 200, 2000),
};

/** QUIT when connected; otherwise drop the socket at once (QUIT would be refused without an offline queue). */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status !== 'ready') return redis.disconnect();
  await redis.quit().catch(() => redis.disconnect());
}

/** The password of a REDIS_URL as it may show up in an error text (plain and URL-encoded), to scrub from logs. */
export function redisUrlSecrets(url: string): string[] {
  try {
    const password = decodeURIComponent(new URL(url).password);
    return password ? [password, encodeURIComponent(password)] : [];
  } catch {
    return [];
  }
}
