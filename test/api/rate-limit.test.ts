import request from 'supertest';
import { testApp } from '../helpers/test-app';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { createMemoryLimiter, createRedisLimiter } from '../../server/http/rate-limit/limiter';

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

test('wrong keys are limited per client IP, so keys cannot be guessed at speed', async () => {
  const limited = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '5' } });
  try {
    const codes = [];
    for (let i = 0; i < 7; i++) {
      const res = await request(limited.app).get('/api/v1/conversations').set('Authorization', `Bearer wck_guess${i}`);
      codes.push(res.status);
    }
    expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(codes.slice(5)).toEqual([429, 429]);
    // A valid key from that client IP is refused too: a 200 would tell a guesser which keys are real.
    // (From another client IP it works: test/api/proxy-address.test.ts.)
    expect((await request(limited.app).get('/api/v1/conversations').set(bearer(limited.site.key))).status).toBe(429);
  } finally {
    await limited.close();
  }
});

test('missing and malformed headers count against the client IP like wrong keys', async () => {
  const limited = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '3' } });
  try {
    const send = (auth?: string) => {
      const r = request(limited.app).get('/api/v1/conversations');
      return auth === undefined ? r : r.set('Authorization', auth);
    };
    expect((await send()).status).toBe(401);
    expect((await send('Basic dXNlcjpwYXNz')).status).toBe(401);
    expect((await send('Bearer not-even-a-key')).status).toBe(401);
    const over = await send('Bearer wck_doesNotExist000000000000000000000000000');
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('rate_limit_exceeded');
  } finally {
    await limited.close();
  }
});

test('a client IP never gets more key lookups than its budget, even all at once; valid keys give their slot back', async () => {
  const limited = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '5' } });
  try {
    const lookups = jest.spyOn(limited.runtime.services.access, 'authenticate');
    // Valid keys first: they are looked up, and their client IP slots are returned.
    const keys = await Promise.all([1, 2, 3, 4, 5, 6].map(() => limited.newKey(limited.site.id, ['conversations:read'])));
    for (const k of keys) expect((await request(limited.app).get('/api/v1/conversations').set(bearer(k.key))).status).toBe(200);
    await new Promise((r) => setImmediate(r)); // the un-awaited slot releases
    lookups.mockClear();
    // Then 60 wrong keys at once from the same client IP.
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        request(limited.app).get('/api/v1/conversations').set('Authorization', `Bearer wck_guess${i}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(55);
    expect(lookups.mock.calls.length).toBeLessThanOrEqual(5);
  } finally {
    await limited.close();
  }
});

test('memory limiter: a reservation counts until it is released, once', async () => {
  let now = 1_800_000_000_000;
  const limiter = createMemoryLimiter(2, () => now);
  const a = await limiter.reserve('b');
  const b = await limiter.reserve('b');
  expect([a.allowed, b.allowed]).toEqual([true, true]);
  expect((await limiter.reserve('b')).allowed).toBe(false);
  await a.release();
  await a.release(); // a second release must not free someone else's slot
  expect((await limiter.hit('b')).allowed).toBe(true);
  expect((await limiter.hit('b')).allowed).toBe(false);
  now += 60_001;
  expect((await limiter.hit('b')).allowed).toBe(true);
});

test('with Redis, two instances share one budget per key', async () => {
  const prefix = `chat-test:${randomBytes(4).toString('hex')}:`;
  const r1 = new Redis('redis://127.0.0.1:6379');
  const r2 = new Redis('redis://127.0.0.1:6379');
  const a = await createHarness({ limiter: createRedisLimiter(r1, 4, prefix) });
  // A second instance: its own app and its own Redis connection, the same database.
  const b = testApp(a.runtime.services, createRedisLimiter(r2, 4, prefix));
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

test('with Redis, a reservation holds a slot in the shared window until it is released', async () => {
  const prefix = `chat-test:${randomBytes(4).toString('hex')}:`;
  const redis = new Redis('redis://127.0.0.1:6379');
  try {
    const limiter = createRedisLimiter(redis, 2, prefix);
    const a = await limiter.reserve('ip:203.0.113.9');
    await limiter.reserve('ip:203.0.113.9');
    expect(await redis.zcard(`${prefix}ip:203.0.113.9`)).toBe(2);
    expect((await limiter.reserve('ip:203.0.113.9')).allowed).toBe(false);
    await a.release();
    expect(await redis.zcard(`${prefix}ip:203.0.113.9`)).toBe(1);
    expect((await limiter.hit('ip:203.0.113.9')).allowed).toBe(true);
  } finally {
    await redis.del(`${prefix}ip:203.0.113.9`);
    await redis.quit();
  }
});
