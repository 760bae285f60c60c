import { createHarness, Harness } from '../helpers/harness';
import { waitFor, workerPool } from './helpers';

/** The delivery log keeps 30 days; a worker removes older rows when it starts and every hour. */
let h: Harness;
const workers = workerPool(() => h);

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await workers.stopAll();
  await h.close();
});

const DAY = 24 * 3600 * 1000;

test('attempt rows, finished deliveries and events older than 30 days are removed; newer and pending ones stay', async () => {
  const db = h.runtime.db;
  const now = Date.now();
  const old = now - 31 * DAY;
  const recent = now - 29 * DAY;
  const site = h.site.id;
  const event = (id: string, at: number) => ({ id: `message.created:${id}`, site_id: site, name: 'message.created', body: '{}', created_at: at });
  const delivery = (id: string, status: string, at: number) => ({
    event_id: `message.created:${id}`,
    site_id: site,
    endpoint_id: 'whk_x',
    status,
    attempts: 1,
    round_base: 0,
    next_attempt_at: at,
    lease_owner: null,
    lease_until: null,
    updated_at: at,
  });
  const attempt = (id: string, at: number) => ({
    event_id: `message.created:${id}`,
    site_id: site,
    endpoint_id: 'whk_x',
    event_name: 'message.created',
    attempt: 1,
    url: 'https://example.com/',
    started_at: at,
    duration_ms: 5,
    status_code: 200,
    error: null,
    response_excerpt: 'ok',
  });
  await db('events').insert([
    event('old-delivered', old),
    event('old-failed', old),
    event('old-unsubscribed', old),
    event('old-pending', old),
    event('recent', recent),
  ]);
  await db('deliveries').insert([
    delivery('old-delivered', 'delivered', old),
    delivery('old-failed', 'failed', old),
    delivery('old-pending', 'pending', now + DAY),
    delivery('recent', 'delivered', recent),
  ]);
  await db('delivery_attempts').insert([attempt('old-delivered', old), attempt('old-failed', old), attempt('recent', recent)]);

  workers.start();
  await waitFor('the cleanup', async () => (await db('delivery_attempts').where('started_at', '<', now - 30 * DAY)).length === 0);
  await waitFor('the cleanup', async () => (await db('events').where('created_at', '<', now - 30 * DAY)).length === 1);

  expect((await db('events').select('id').orderBy('id')).map((r) => r.id)).toEqual(['message.created:old-pending', 'message.created:recent']);
  expect((await db('deliveries').select('event_id').orderBy('event_id')).map((r) => r.event_id)).toEqual([
    'message.created:old-pending',
    'message.created:recent',
  ]);
  expect((await db('delivery_attempts').select('event_id')).map((r) => r.event_id)).toEqual(['message.created:recent']);
});
