import request from 'supertest';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { createRedisLimiter } from '../../server/http/rate-limit/limiter';
import { createApp } from '../../server/app';
import { createLogger } from '../../server/platform/logger';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

test('the 301st request within a minute on one key is 429 with Retry-After; other keys are unaffected', async () => {
  const k = await h.newKey(h.site.id, ['conversations:read']);
  let last: request.Response | undefined;
  for (let i = 1; i <= 300; i++) {
    last = await request(h.app).get('/api/v1/conversations?limit=1').set(bearer(k.key));
    expect(last.status).toBe(200);
  }
  expect(last!.headers['x-ratelimit-remaining']).toBe('0');
  const over = await request(h.app).get('/api/v1/conversations?limit=1').set(bearer(k.key));
  expect(over.status).toBe(429);
  expect(over.body.error.code).toBe('rate_limit_exceeded');
  const retryAfter = Number(over.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  const fresh = await h.newKey(h.site.id, ['conversations:read']);
  expect((await request(h.app).get('/api/v1/conversations').set(bearer(fresh.key))).status).toBe(200);
});

test('the window slides: a slot frees when the oldest request is a minute old', async () => {
  let now = 1_800_000_000_000;
  const clocked = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '3' }, now: () => now });
  try {
    const send = () => request(clocked.app).get('/api/v1/conversations').set(bearer(clocked.site.key));
    expect((await send()).status).toBe(200); // t=0
    now += 30_000;
    expect((await send()).status).toBe(200); // t=30
    expect((await send()).status).toBe(200); // t=30
    const blocked = await send();
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toBe('30');
    now += 30_001; // the t=0 request leaves the window; the two at t=30 stay
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(429);
  } finally {
    await clocked.close();
  }
});

test('wrong keys are limited per client address, so keys cannot be guessed at speed', async () => {
  const limited = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '5' } });
  try {
    const codes = [];
    for (let i = 0; i < 7; i++) {
      const res = await request(limited.app).get('/api/v1/conversations').set('Authorization', `Bearer wck_guess${i}`);
      codes.push(res.status);
    }
    expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(codes.slice(5)).toEqual([429, 429]);
    // a valid key still works: its own budget
    expect((await request(limited.app).get('/api/v1/conversations').set(bearer(limited.site.key))).status).toBe(200);
  } finally {
    await limited.close();
  }
});

test('with Redis, two instances share one budget per key', async () => {
  const prefix = `chat-test:${randomBytes(4).toString('hex')}:`;
  const r1 = new Redis('redis://127.0.0.1:6379');
  const r2 = new Redis('redis://127.0.0.1:6379');
  const a = await createHarness({ limiter: createRedisLimiter(r1, 4, prefix) });
  // A second instance: its own app and its own Redis connection, the same database.
  const b = createApp({
    services: a.runtime.services,
    logger: createLogger('silent'),
    limiter: createRedisLimiter(r2, 4, prefix),
    validateResponses: true,
    ready: async () => true,
  });
  try {
    const codes: number[] = [];
    for (const app of [a.app, b, a.app, b, a.app, b]) {
      codes.push((await request(app).get('/api/v1/conversations').set(bearer(a.site.key))).status);
    }
    expect(codes).toEqual([200, 200, 200, 200, 429, 429]);
  } finally {
    await a.close();
    await r1.quit();
    await r2.quit();
  }
});
