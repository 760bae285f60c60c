/**
 * Issue 7, defect 3 (drill): the rate-limit Redis dies, hangs and comes back. Requests keep being
 * answered quickly (limited in process meanwhile, never a 500), and shared limits resume by
 * themselves. Runs against a private redis-server on its own port, never the shared one.
 */
import https from 'node:https';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import request from 'supertest';
import Redis from 'ioredis';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { freePort, spawnTs, Spawned } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';
import { createLogger } from '../../server/platform/logger';
import { FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../../server/platform/redis';
import { createFailOpenLimiter } from '../../server/http/rate-limit/fail-open';
import { createRedisLimiter, RateLimiter } from '../../server/http/rate-limit/limiter';

const PASSWORD = 'drill-redis-pw-7f3a9c';
const LIMIT = 5;
/**
 * Liveness, not speed: a request that waited for Redis (a reconnect, a queued command) would wait far
 * longer. Whether a request asked Redis at all is counted, never timed.
 */
const ANSWERED_MS = 5000;

/** Log lines the limiter writes, parsed. */
function captureLogs() {
  const lines: { level: number; msg: string; raw: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const raw of String(chunk).split('\n').filter(Boolean)) lines.push({ ...JSON.parse(raw), raw });
      done();
    },
  });
  return { lines, logger: createLogger('info', sink as never) };
}

describe('Redis dies and returns under traffic', () => {
  let port: number;
  let redis: PrivateRedis | undefined;
  let probe: Redis;
  let h: Harness;
  let limiter: RateLimiter;
  const logs = captureLogs();
  /** The limiter's Lua scripts sent to Redis: the requests that asked it. */
  let scriptsSent = () => 0;
  /** The limiter's clock: stopped, its one-second cool-down after a failure cannot run out however slow the machine. */
  let stoppedAt: number | null = null;

  beforeAll(async () => {
    port = await freePort();
    redis = await startPrivateRedis(port, PASSWORD);
    const url = `redis://:${PASSWORD}@127.0.0.1:${port}`;
    // As createLimiter makes it (server/runtime.ts), with a clock of the test's and the commands counted.
    const client = new Redis(url, FAIL_FAST_REDIS_OPTIONS);
    const sent = jest.spyOn(client, 'sendCommand');
    scriptsSent = () => sent.mock.calls.filter(([command]) => /^eval/i.test(command.name)).length;
    limiter = createFailOpenLimiter(client, { limit: LIMIT, logger: logs.logger, secrets: redisUrlSecrets(url), now: () => stoppedAt ?? Date.now() });
    h = await createHarness({ limiter });
    probe = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 200 });
    probe.on('error', () => {}); // it is down on purpose part of the time
  });

  afterAll(async () => {
    probe?.disconnect();
    await limiter?.close?.();
    await h?.close();
    await stopPrivateRedis(redis);
  });

  const get = (key: string) => request(h.app).get('/api/v1/conversations?limit=1').set(bearer(key));
  /** A request, how long it took, and whether it asked Redis. */
  const timed = async (key: string) => {
    const asked = scriptsSent();
    const started = Date.now();
    const res = await get(key);
    return { res, ms: Date.now() - started, askedRedis: scriptsSent() > asked };
  };
  const keyBucket = (keyId: string) => `chat:ratelimit:key:${keyId}`;

  test('shared, then in process while Redis is dead (quick, never 500), then shared again once it is back', async () => {
    await waitFor('the limiter to use Redis', () => limiter.backend!() === 'shared');
    await probe.connect();

    // 1. Redis up: the key is counted in Redis.
    for (const remaining of ['4', '3']) {
      const res = await get(h.site.key);
      expect(res.status).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe(String(LIMIT));
      expect(res.headers['x-ratelimit-remaining']).toBe(remaining);
    }
    expect(await probe.zcard(keyBucket(h.site.keyId))).toBe(2);

    // 2. Redis killed: once the connection is known gone, every request is answered from this
    // instance's own window without asking Redis.
    await stopPrivateRedis(redis);
    await waitFor('the limiter to notice', () => limiter.backend!() === 'local');
    const during = [];
    for (let i = 0; i < LIMIT + 2; i++) during.push(await timed(h.site.key));
    expect(during.map((d) => [d.res.status, d.askedRedis])).toEqual([...Array(LIMIT).fill([200, false]), [429, false], [429, false]]);
    expect(during[0].res.headers['x-ratelimit-limit']).toBe(String(LIMIT));
    expect(during[LIMIT].res.body.error.code).toBe('rate_limit_exceeded');
    expect(Number(during[LIMIT].res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(limiter.backend!()).toBe('local');
    // Bad keys are still limited per client IP meanwhile, and still answered quickly.
    expect((await request(h.app).get('/api/v1/conversations').set('Authorization', 'Bearer wck_nope')).status).toBe(401);

    // One warning for the whole outage so far, however many failures were seen.
    const warnings = logs.lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0].msg).toMatch(/Redis unavailable.*fall back/);

    // 3. Redis back on the same port (empty: no persistence): shared limits resume by themselves.
    redis = await startPrivateRedis(port, PASSWORD);
    await waitFor('the limiter to reconnect to Redis', () => limiter.backend!() === 'shared', 20_000);
    const back = await get(h.site.key);
    // The in-process window of this key is full, so a 200 can only come from Redis's window.
    expect(back.status).toBe(200);
    expect(back.headers['x-ratelimit-remaining']).toBe(String(LIMIT - 1));
    await waitFor('the probe client to reconnect', () => probe.status === 'ready');
    expect(await probe.zcard(keyBucket(h.site.keyId))).toBe(1);
    // A second instance sharing the budget spends the rest of it: this one then says 429.
    const otherInstance = createRedisLimiter(probe, LIMIT);
    for (let i = 0; i < LIMIT - 1; i++) expect((await otherInstance.hit(`key:${h.site.keyId}`)).allowed).toBe(true);
    expect((await get(h.site.key)).status).toBe(429);
    expect(logs.lines.some((l) => l.level === 30 && /Redis ready again/.test(l.msg))).toBe(true);

    // No log line carries the Redis password.
    for (const l of logs.lines) expect(l.raw).not.toContain(PASSWORD);
  });

  test('a Redis that hangs (accepts, never answers) costs a request at most the command time-out', async () => {
    await waitFor('the limiter to use Redis', () => limiter.backend!() === 'shared');
    const k = await h.newKey(h.site.id, ['conversations:read']);
    expect((await get(k.key)).status).toBe(200);
    redis!.child.kill('SIGSTOP');
    try {
      stoppedAt = Date.now();
      const first = await timed(k.key);
      const during = [first];
      for (let i = 0; i < 3; i++) during.push(await timed(k.key));
      // The first asks Redis and gets the command time-out (0.3 s); after it Redis is skipped for a
      // while (the clock is stopped inside that while) instead of costing every request.
      expect(during.map((d) => [d.res.status, d.askedRedis])).toEqual([
        [200, true],
        [200, false],
        [200, false],
        [200, false],
      ]);
      expect(first.ms).toBeLessThan(ANSWERED_MS);
    } finally {
      stoppedAt = null;
      redis!.child.kill('SIGCONT');
    }
    await waitFor('the limiter to use Redis again', async () => {
      await get(k.key);
      return (await probe.zcard(keyBucket(k.id))) >= 2;
    });
  });
});

describe('REDIS_URL points where nothing listens from the start', () => {
  let server: Spawned | undefined;
  let h: Harness;

  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      // SIGTERM: tsx passes it on to the node process it runs (a SIGKILL would orphan that one).
      server.child.kill('SIGTERM');
      const force = setTimeout(() => server!.child.kill('SIGKILL'), 10_000);
      await server.exited();
      clearTimeout(force);
    }
    await h?.close();
  });

  test('the service starts and answers 200 with rate-limit headers, quickly, and says why once', async () => {
    h = await createHarness();
    const [port, deadPort] = [await freePort(), await freePort()];
    server = spawnTs('server/main.ts', [], {
      DATA_DIR: h.database.dataDir,
      DATABASE_URL: h.database.databaseUrl ?? '',
      PORT: String(port),
      REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${deadPort}`,
      RATE_LIMIT_PER_MINUTE: '3',
      NODE_ENV: '',
      LOG_LEVEL: 'info',
      EMBEDDED_WORKER: 'false',
    });
    await server.waitFor(/listening \(HTTPS\)/);
    const ca = fs.readFileSync(path.join(h.database.dataDir, 'tls/localhost.crt'), 'utf8');
    const call = () =>
      new Promise<{ status: number; headers: Record<string, unknown>; ms: number }>((resolve, reject) => {
        const started = Date.now();
        const req = https.request({ host: 'localhost', port, path: '/api/v1/conversations', ca, agent: false, headers: bearer(h.site.key) }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, ms: Date.now() - started }));
        });
        req.on('error', reject);
        req.end();
      });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await call());
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    expect(answers[0].headers['x-ratelimit-limit']).toBe('3');
    for (const a of answers) expect(a.ms).toBeLessThan(ANSWERED_MS);
    // Once for each user of Redis in the process: the rate limits and the delivery workers' wake-ups.
    await server.waitFor(/Redis unavailable: rate limits/);
    await server.waitFor(/Redis unavailable: delivery workers/);
    const output = server.stdout() + server.stderr();
    expect(output.match(/Redis unavailable: rate limits/g)).toHaveLength(1);
    expect(output.match(/Redis unavailable: delivery workers/g)).toHaveLength(1);
    expect(output).not.toContain(PASSWORD);
    expect(output).not.toMatch(/Unhandled error event/);
  });
});
