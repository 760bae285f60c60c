import type { Knex } from 'knex';
import { createHarness, Harness } from '../helpers/harness';
import { createEventStore, type AttemptRow, type Outcome } from '../../server/webhooks/store';
import { deliveryOf, attemptsOf, eventIdsOf, webhooks } from './helpers';

/**
 * What a claim and a group of results send, counted from Knex's `query` events (a speed claim is a
 * count; docs/performance.md, "Delivery, third round"): the address is read once per claim, not
 * joined into every claimed row, nothing is read back after the claim's UPDATE, and a group of
 * results moves its deliveries with one UPDATE per kind of next state that binds three values a
 * row (the key and its two times) where a CASE per column bound thirteen.
 */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const OWNER = 'claim-cost-test';
const ROWS = 12;

function counted(db: Knex) {
  const seen: { sql: string; bindings: unknown[] }[] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => seen.push({ sql: q.sql.toLowerCase(), bindings: q.bindings ?? [] });
  db.on('query', listener);
  return { seen, stop: () => db.removeListener('query', listener) };
}

async function siteWithDue(name: string, events: number) {
  const site = await h.newSite(name);
  await webhooks(h).setEndpoint(site.id, `https://localhost:9/${name}`, 'message.created');
  for (let i = 0; i < events; i++) await h.visitorSay(site.id, `v${i}`, 'hi');
  return { site, ids: await eventIdsOf(h, site.id, 'message.created') };
}

const claimAll = (now: number) =>
  createEventStore(h.runtime.db).claimDue({ owner: OWNER, now, leaseMs: 60_000, limit: 100, maxAttempts: 3, held: new Map(), allowance: () => 100 });

const logRow = (eventId: string, siteId: string, endpointId: string, at: number): AttemptRow => ({
  event_id: eventId,
  site_id: siteId,
  endpoint_id: endpointId,
  event_name: 'message.created',
  attempt: 1,
  url: 'https://localhost:9/x',
  started_at: at,
  duration_ms: 3,
  status_code: 200,
  error: null,
  response_excerpt: 'ok',
  request_headers: '{"X-Service-Attempt":"1"}',
});

test('a claim reads the address once and reads nothing back after its UPDATE', async () => {
  const { ids } = await siteWithDue('claim-once', ROWS);
  const q = counted(h.runtime.db);
  const { claimed } = await claimAll(Date.now()).finally(q.stop);
  expect(claimed.map((c) => c.delivery.event_id).sort()).toEqual([...ids].sort());
  const reads = (table: string) => q.seen.filter((s) => s.sql.startsWith('select') && s.sql.includes(table));
  expect(reads('webhook_endpoints')).toHaveLength(1);
  expect(reads('webhook_endpoints')[0].sql).not.toContain('deliveries');
  // The locking read alone reads the deliveries.
  expect(reads('deliveries')).toHaveLength(1);
  // What the claim hands over is what the database holds now.
  const c = claimed[0];
  const d = await deliveryOf(h, c.delivery.event_id);
  expect([Number(d.attempts), d.lease_owner, Number(d.lease_until), Number(d.next_attempt_at)]).toEqual([
    c.attempt,
    OWNER,
    c.delivery.lease_until,
    c.delivery.lease_until,
  ]);
  expect(c.endpoint?.url).toBe('https://localhost:9/claim-once');
  expect(c.event?.body).toContain(c.delivery.event_id);
  expect(c.delivery.updated_at).toBe(Number(d.updated_at));
});

test('a group of results binds three values a delivery in one UPDATE per kind of next state', async () => {
  const { site, ids } = await siteWithDue('results-once', ROWS);
  const now = Date.now();
  const { claimed } = await claimAll(now);
  const endpointId = claimed[0].delivery.endpoint_id;
  const outcomes: Outcome[] = claimed.map((c, i) => ({
    eventId: c.delivery.event_id,
    attempt: c.attempt,
    row: logRow(c.delivery.event_id, site.id, endpointId, now + i),
    next: { status: 'delivered', nextAttemptAt: now + 10 + i, now: now + 10 + i },
  }));
  const q = counted(h.runtime.db);
  const applied = await createEventStore(h.runtime.db).finishAttempts(OWNER, outcomes).finally(q.stop);
  expect(applied).toEqual(ids.map(() => true));
  const updates = q.seen.filter((s) => s.sql.startsWith('update'));
  expect(updates).toHaveLength(1);
  expect(updates[0].bindings.length).toBeLessThanOrEqual(ROWS * 5 + 8);
  expect(q.seen.filter((s) => s.sql.startsWith('insert'))).toHaveLength(1);
  // Each delivery keeps its own times.
  for (const o of outcomes) {
    const d = await deliveryOf(h, o.eventId);
    expect([d.status, Number(d.attempts), d.lease_owner, d.lease_until]).toEqual(['delivered', 1, null, null]);
    expect([Number(d.next_attempt_at), Number(d.updated_at)]).toEqual([o.next.nextAttemptAt, o.next.now]);
    expect(await attemptsOf(h, o.eventId)).toMatchObject([{ attempt: 1, status_code: 200, request_headers: '{"X-Service-Attempt":"1"}' }]);
  }
});

test('a group with every kind of next state moves each delivery as it says, and a stale claim is logged only', async () => {
  const { site } = await siteWithDue('results-mixed', 5);
  const now = Date.now();
  const { claimed } = await claimAll(now);
  const [delivered, retry, givenBack, unsent, failed] = claimed.map((c) => c.delivery.event_id);
  const endpointId = claimed[0].delivery.endpoint_id;
  const row = (id: string) => logRow(id, site.id, endpointId, now);
  const outcomes: Outcome[] = [
    { eventId: delivered, attempt: 1, row: row(delivered), next: { status: 'delivered', nextAttemptAt: now + 1, now: now + 1 } },
    { eventId: retry, attempt: 1, row: row(retry), next: { status: 'pending', nextAttemptAt: now + 5_000, now: now + 2 } },
    { eventId: givenBack, attempt: 1, row: null, next: { status: 'pending', nextAttemptAt: now + 3, now: now + 3, attempts: 0 } },
    {
      eventId: unsent,
      attempt: 1,
      row: null,
      next: { status: 'failed', nextAttemptAt: now + 4, now: now + 4, attempts: 0, unsentReason: 'event address disabled' },
    },
    { eventId: failed, attempt: 1, row: { ...row(failed), status_code: 410 }, next: { status: 'failed', nextAttemptAt: now + 5, now: now + 5 } },
  ];
  expect(await createEventStore(h.runtime.db).finishAttempts(OWNER, outcomes)).toEqual([true, true, true, true, true]);
  const state = async (id: string) => {
    const d = await deliveryOf(h, id);
    return [d.status, Number(d.attempts), Number(d.next_attempt_at), Number(d.updated_at), d.lease_owner, d.unsent_reason ?? null];
  };
  expect(await state(delivered)).toEqual(['delivered', 1, now + 1, now + 1, null, null]);
  expect(await state(retry)).toEqual(['pending', 1, now + 5_000, now + 2, null, null]);
  expect(await state(givenBack)).toEqual(['pending', 0, now + 3, now + 3, null, null]);
  expect(await state(unsent)).toEqual(['failed', 0, now + 4, now + 4, null, 'event address disabled']);
  expect(await state(failed)).toEqual(['failed', 1, now + 5, now + 5, null, null]);
  expect((await attemptsOf(h, givenBack)).length).toBe(0);

  // Claimed again (the retry is due later; the given-back row now): a result of the first claim is stale.
  const again = await claimAll(now + 10);
  expect(again.claimed.map((c) => c.delivery.event_id)).toEqual([givenBack]);
  const stale: Outcome = {
    eventId: givenBack,
    attempt: 2,
    row: { ...row(givenBack), attempt: 2 },
    next: { status: 'delivered', nextAttemptAt: now + 20, now: now + 20 },
  };
  const notOurs: Outcome = { eventId: retry, attempt: 1, row: row(retry), next: { status: 'delivered', nextAttemptAt: now + 21, now: now + 21 } };
  expect(await createEventStore(h.runtime.db).finishAttempts('another-owner', [stale, notOurs])).toEqual([false, false]);
  expect((await deliveryOf(h, givenBack)).lease_owner).toBe(OWNER);
  expect((await attemptsOf(h, givenBack)).map((a) => a.attempt)).toEqual([2]);
  expect((await deliveryOf(h, retry)).status).toBe('pending');
});
