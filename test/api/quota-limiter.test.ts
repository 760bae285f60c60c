/**
 * The visitor-file budgets (`spend`) of the rate limiter on Redis: one budget across instances,
 * atomic under concurrency, refundable, keys that expire; and in-process while Redis is away.
 */
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { createRedisLimiter } from '../../server/http/rate-limit/limiter';
import { createFailOpenLimiter } from '../../server/http/rate-limit/fail-open';
import { FAIL_FAST_REDIS_OPTIONS } from '../../server/platform/redis';
import { HOUR_MS } from '../../server/media/quota';
import { freePort } from '../helpers/spawn';

const BUCKET = 'visitor-file-bytes:ip:203.0.113.9';

test('with Redis, two instances spend one budget, never past it under concurrency, and refunds go back to it', async () => {
  const prefix = `chat-test:${randomBytes(4).toString('hex')}:`;
  const r1 = new Redis('redis://127.0.0.1:6379');
  const r2 = new Redis('redis://127.0.0.1:6379');
  try {
    const a = createRedisLimiter(r1, 300, prefix);
    const b = createRedisLimiter(r2, 300, prefix);
    const first = await a.spend(BUCKET, 600, 1000, HOUR_MS);
    expect(first).toMatchObject({ allowed: true, used: 600 });
    const refused = await b.spend(BUCKET, 500, 1000, HOUR_MS);
    expect(refused).toMatchObject({ allowed: false, used: 600 });
    expect(refused.retryAfterSeconds).toBeGreaterThan(0);
    await first.refund(200);
    expect((await b.spend(BUCKET, 500, 1000, HOUR_MS)).allowed).toBe(true);

    // 20 simultaneous spends of 10 against 100 left: exactly 10 are allowed.
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).spend(BUCKET, 10, 1000, HOUR_MS)));
    expect(results.filter((r) => r.allowed)).toHaveLength(10);

    const keys = await r1.keys(`${prefix}*`);
    expect(keys).toHaveLength(1);
    const ttl = await r1.pttl(keys[0]);
    expect(ttl).toBeGreaterThan(HOUR_MS);
    expect(ttl).toBeLessThanOrEqual(2 * HOUR_MS);
    expect(Number(await r1.get(keys[0]))).toBe(1000);
  } finally {
    const keys = await r1.keys(`${prefix}*`);
    if (keys.length) await r1.del(...keys);
    await r1.quit();
    await r2.quit();
  }
});

test('while Redis is unreachable the budget is kept in this process, and still refuses', async () => {
  const port = await freePort(); // nothing listens there
  const redis = new Redis({ ...FAIL_FAST_REDIS_OPTIONS, host: '127.0.0.1', port, lazyConnect: false });
  const warnings: string[] = [];
  const limiter = createFailOpenLimiter(redis, { limit: 300, logger: { warn: (_o, m) => warnings.push(m), info: () => undefined } });
  try {
    expect((await limiter.spend(BUCKET, 800, 1000, HOUR_MS)).allowed).toBe(true);
    const refused = await limiter.spend(BUCKET, 300, 1000, HOUR_MS);
    expect(refused.allowed).toBe(false);
    expect(limiter.backend?.()).toBe('local');
  } finally {
    await limiter.close?.();
  }
});
