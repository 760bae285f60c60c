/** /readyz says what is not ready (database, migrations, Redis when set); / leads to the dashboard. */
import request from 'supertest';
import Redis from 'ioredis';
import { createHarness, Harness } from '../helpers/harness';
import { createApp } from '../../server/app';
import { createLogger } from '../../server/platform/logger';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';
import { checkReadiness } from '../../server/platform/readiness';
import { FAIL_FAST_REDIS_OPTIONS } from '../../server/platform/redis';
import { migrationSource } from '../../server/db/migrations';
import { migrate } from '../../server/db/knex';
import { freePort } from '../helpers/spawn';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(() => h.close());

const appWith = (redis: Redis) =>
  createApp({
    services: h.runtime.services,
    logger: createLogger('silent'),
    limiter: createMemoryLimiter(1000),
    validateResponses: true,
    ready: () => checkReadiness({ db: h.runtime.db, redis }),
  });

test('ready: each check says ok', async () => {
  const res = await request(h.app).get('/readyz');
  expect([res.status, res.body]).toEqual([200, { data: { status: 'ready', checks: { database: 'ok', migrations: 'ok' } } }]);
});

test('a pending migration (a rollback, or an instance older than its database) is not ready, with what to run', async () => {
  await h.runtime.db.migrate.down({ migrationSource });
  const res = await request(h.app).get('/readyz');
  expect(res.status).toBe(503);
  expect(res.headers['retry-after']).toBe('5');
  expect(res.body.error).toMatchObject({
    code: 'service_unavailable',
    message: 'Not ready: migrations 1 pending: run npm run db:migrate.',
    details: [{ path: 'migrations', message: '1 pending: run npm run db:migrate' }],
  });
  await h.runtime.db.migrate.latest({ migrationSource });
});

test("a newer release's migration (a rolling upgrade in progress) keeps this instance ready, and it still starts", async () => {
  const db = h.runtime.db;
  await db('knex_migrations').insert({ name: '999_from_a_newer_release', batch: 999, migration_time: new Date() });
  try {
    const res = await request(h.app).get('/readyz');
    expect([res.status, res.body.data?.checks]).toEqual([200, { database: 'ok', migrations: 'ok' }]);
    expect(await migrate(db)).toEqual({ newer: ['999_from_a_newer_release'] });
  } finally {
    await db('knex_migrations').where({ name: '999_from_a_newer_release' }).del();
  }
});

test('Redis: answered when it answers; a 503 naming it, without its address or password, when it does not', async () => {
  const redis = new Redis('redis://127.0.0.1:6379', FAIL_FAST_REDIS_OPTIONS);
  await new Promise((resolve) => redis.once('ready', resolve));
  try {
    expect((await request(appWith(redis)).get('/readyz')).body.data.checks).toEqual({ database: 'ok', migrations: 'ok', redis: 'ok' });
  } finally {
    redis.disconnect();
  }
  const closed = await freePort();
  const gone = new Redis(`redis://:hunter2@127.0.0.1:${closed}`, FAIL_FAST_REDIS_OPTIONS);
  gone.on('error', () => {});
  try {
    const res = await request(appWith(gone)).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body.error.details).toEqual([{ path: 'redis', message: expect.stringMatching(/^does not answer \(/) }]);
    expect(JSON.stringify(res.body)).not.toMatch(/hunter2|127\.0\.0\.1/);
  } finally {
    gone.disconnect();
  }
});

test.each(['GET', 'HEAD'] as const)('%s / redirects to the dashboard by a relative location', async (method) => {
  const res = await (method === 'GET' ? request(h.app).get('/') : request(h.app).head('/'));
  expect(res.status).toBe(302);
  expect(res.headers.location).toBe('/dashboard/');
});
