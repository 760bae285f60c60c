/**
 * Deliveries that end without an attempt (their address disabled) count none and log none, say why
 * in the delivery, show so in the management API's log and the CLI's `webhook deliveries`, and the
 * first real send after a redelivery or recovery is the attempt after the last one really made.
 */
import { answer, attemptsOf, deliveryOf, waitFor } from './helpers';
import { ownerDeliverySuite } from './owner-suite';
import { webhookCommands } from '../../server/cli/commands/webhooks';
import { parseArgs } from '../../server/cli/args';
import { UNSENT } from '../../server/webhooks/store';

const suite = ownerDeliverySuite();
const { api, messageEvent, pool } = suite;

/** The CLI's `webhook deliveries` as the operator runs it (in process: the same command function). */
async function cliDeliveries(...argv: string[]) {
  const out = await webhookCommands['webhook deliveries'].run(suite.h.runtime, parseArgs(argv, webhookCommands['webhook deliveries'].options));
  return out as {
    json: { deliveries: { eventId: string; attempt: number; status: number | null; error: string | null; deliveryStatus: string }[] };
    text: string;
  };
}

const sentAs = (eventId: string) =>
  suite.receiver.requests.filter((r) => r.headers['x-service-delivery'] === eventId).map((r) => r.headers['x-service-attempt']);
const logOf = async (eventId: string) =>
  (await attemptsOf(suite.h, eventId)).map((a) => [Number(a.attempt), a.status_code === null ? null : Number(a.status_code), a.error]);

test('written while the address is disabled: failed with 0 attempts and its reason, no attempt row; redelivered and recovered, sent as attempt 1', async () => {
  const site = suite.h.site.id;
  expect((await api('put', `/sites/${site}/event-address`, { url: suite.receiver.url('/unsent'), events: ['message.created'] })).status).toBe(201);
  expect((await api('patch', `/sites/${site}/event-address`, { enabled: false })).body.data.state).toBe('disabled');
  const since = new Date().toISOString();
  const first = await messageEvent(site, 'v-unsent-1', 'failed');
  const second = await messageEvent(site, 'v-unsent-2', 'failed');

  for (const id of [first, second]) {
    expect(sentAs(id)).toEqual([]);
    expect(await logOf(id)).toEqual([]);
    expect(Number((await deliveryOf(suite.h, id)).attempts)).toBe(0);
    expect(await deliveryOf(suite.h, id)).toMatchObject({ status: 'failed', unsent_reason: 'event address disabled' });
  }
  // The management API's log: the delivery with no attempt and the reason.
  const one = await api('get', `/sites/${site}/deliveries/${encodeURIComponent(first)}`);
  expect(one.status).toBe(200);
  expect(one.body.data.delivery).toMatchObject({ outcome: 'failed', attempts: 0, unsentReason: 'event address disabled', nextAttemptAt: null });
  expect(one.body.data.attempts).toEqual([]);
  const listed = await api('get', `/sites/${site}/deliveries?outcome=failed&since=${encodeURIComponent(since)}`);
  expect(listed.body.data.map((d: { eventId: string; attempts: number; unsentReason: string }) => [d.eventId, d.attempts, d.unsentReason]).sort()).toEqual(
    [
      [first, 0, 'event address disabled'],
      [second, 0, 'event address disabled'],
    ].sort(),
  );
  // The CLI's log: one row each, attempt 0, the reason as its error (also under --failed and --event).
  const cli = await cliDeliveries('--site', site, '--json');
  const rowsOf = (ds: { eventId: string }[], id: string) => ds.filter((d) => d.eventId === id);
  for (const id of [first, second]) {
    expect(rowsOf(cli.json.deliveries, id)).toEqual([
      expect.objectContaining({ attempt: 0, status: null, error: 'not sent: event address disabled', deliveryStatus: 'failed' }),
    ]);
  }
  expect(cli.text).toContain('not sent: event address disabled');
  expect(rowsOf((await cliDeliveries('--site', site, '--failed')).json.deliveries, first)).toHaveLength(1);
  expect((await cliDeliveries('--site', site, '--event', first)).json.deliveries.map((d) => d.eventId)).toEqual([first]);

  // Enabled again: a redelivery and a recovery each send their event as attempt 1.
  suite.receiver.on('/unsent', answer(200, 'ok'));
  await api('patch', `/sites/${site}/event-address`, { enabled: true });
  expect((await api('post', `/sites/${site}/deliveries/${encodeURIComponent(first)}/redeliver`)).body.data.eventIds).toEqual([first]);
  pool.wake();
  await waitFor('the redelivery', async () => (await deliveryOf(suite.h, first)).status === 'delivered');
  expect((await api('post', `/sites/${site}/delivery-recovery`, { since })).body.data.eventIds).toEqual([second]);
  pool.wake();
  await waitFor('the recovery', async () => (await deliveryOf(suite.h, second)).status === 'delivered');
  for (const id of [first, second]) {
    expect(sentAs(id)).toEqual(['1']);
    expect(await logOf(id)).toEqual([[1, 200, null]]);
    const after = (await api('get', `/sites/${site}/deliveries/${encodeURIComponent(id)}`)).body.data.delivery;
    expect(after).toMatchObject({ outcome: 'delivered', attempts: 1, unsentReason: null });
  }
});

test('a delivery really attempted keeps its numbers: a round unsent while disabled adds none, the next send continues them', async () => {
  const site = (await suite.h.newSite('numbering')).id;
  await suite.h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, site, 'owner@example.com', 'owner');
  suite.receiver.on('/numbering', answer(410, 'gone'));
  await api('put', `/sites/${site}/event-address`, { url: suite.receiver.url('/numbering'), events: ['message.created'] });
  const id = await messageEvent(site, 'v-numbering', 'failed'); // 410: one attempt, not retried
  expect(await logOf(id)).toEqual([[1, 410, null]]);

  await api('patch', `/sites/${site}/event-address`, { enabled: false });
  expect((await api('post', `/sites/${site}/deliveries/${encodeURIComponent(id)}/redeliver`)).status).toBe(202);
  pool.wake();
  await waitFor('the unsent round', async () => (await deliveryOf(suite.h, id)).status === 'failed');
  expect(Number((await deliveryOf(suite.h, id)).attempts)).toBe(1);
  expect(await deliveryOf(suite.h, id)).toMatchObject({ unsent_reason: 'event address disabled' });
  expect(await logOf(id)).toEqual([[1, 410, null]]);

  suite.receiver.on('/numbering', answer(200, 'ok'));
  await api('patch', `/sites/${site}/event-address`, { enabled: true });
  await api('post', `/sites/${site}/deliveries/${encodeURIComponent(id)}/redeliver`);
  pool.wake();
  await waitFor('the redelivery', async () => (await deliveryOf(suite.h, id)).status === 'delivered');
  expect(sentAs(id)).toEqual(['1', '2']);
  expect(await logOf(id)).toEqual([
    [1, 410, null],
    [2, 200, null],
  ]);
  expect(await deliveryOf(suite.h, id)).toMatchObject({ unsent_reason: null });
});

test('a round whose every attempt was interrupted ends failed with the last interrupted attempt logged too', async () => {
  const site = (await suite.h.newSite('interrupted')).id;
  await suite.h.runtime.services.webhooks.setEndpoint(site, suite.receiver.url('/interrupted'), 'message.created');
  const id = await messageEvent(site, 'v-interrupted', 'delivered');
  // As a worker leaves it when it dies during the round's third attempt (the first two logged so).
  const startedAt = Date.now() - 60_000;
  await suite.h.runtime
    .db('deliveries')
    .where({ event_id: id })
    .update({
      status: 'pending',
      attempts: 3,
      round_base: 0,
      lease_owner: 'dead-worker',
      lease_until: startedAt + 30_000,
      next_attempt_at: startedAt + 30_000,
      updated_at: startedAt,
    });
  await suite.h.runtime
    .db('delivery_attempts')
    .where({ event_id: id })
    .update({ attempt: 1, status_code: null, error: 'interrupted: the worker stopped during the attempt' });
  await suite.h.runtime.db('delivery_attempts').insert({ ...(await attemptsOf(suite.h, id))[0], id: undefined, attempt: 2, started_at: startedAt - 30_000 });
  pool.wake();
  await waitFor('the round given up', async () => (await deliveryOf(suite.h, id)).status === 'failed');
  const interrupted = 'interrupted: the worker stopped during the attempt';
  expect(await logOf(id)).toEqual([
    [1, null, interrupted],
    [2, null, interrupted],
    [3, null, interrupted],
  ]);
  expect(Number((await deliveryOf(suite.h, id)).attempts)).toBe(3);
  expect(await deliveryOf(suite.h, id)).toMatchObject({ unsent_reason: null });
});

test('results recorded in one commit keep their own ends: an unsent one beside a sent one', async () => {
  await pool.stopAll(); // this test claims by hand
  const site = (await suite.h.newSite('group')).id;
  await suite.h.runtime.services.webhooks.setEndpoint(site, suite.receiver.url('/group'), 'message.created');
  await suite.h.visitorSay(site, 'v-group-a', 'one');
  await suite.h.visitorSay(site, 'v-group-b', 'two');
  const store = suite.h.runtime.services.stores.events;
  const t0 = Date.now();
  const { claimed } = await store.claimDue({ owner: 'group', now: t0, leaseMs: 30_000, limit: 10, maxAttempts: 3, held: new Map(), allowance: () => 10 });
  const [unsent, sent] = claimed.filter((c) => c.delivery.site_id === site);
  expect([unsent.attempt, sent.attempt]).toEqual([1, 1]);
  const row = {
    event_id: sent.delivery.event_id,
    site_id: site,
    endpoint_id: sent.delivery.endpoint_id,
    event_name: 'message.created',
    attempt: 1,
    url: sent.endpoint!.url,
    started_at: t0,
    duration_ms: 5,
    status_code: 200,
    error: null,
    response_excerpt: null,
  };
  const applied = await store.finishAttempts('group', [
    {
      eventId: unsent.delivery.event_id,
      attempt: 1,
      row: null,
      next: { status: 'failed', nextAttemptAt: t0, now: t0, attempts: 0, unsentReason: UNSENT.disabled },
    },
    { eventId: sent.delivery.event_id, attempt: 1, row, next: { status: 'delivered', nextAttemptAt: t0, now: t0 } },
  ]);
  expect(applied).toEqual([true, true]);
  const state = async (id: string) => {
    const d = await deliveryOf(suite.h, id);
    return [d.status, Number(d.attempts), d.unsent_reason];
  };
  expect(await state(unsent.delivery.event_id)).toEqual(['failed', 0, 'event address disabled']);
  expect(await state(sent.delivery.event_id)).toEqual(['delivered', 1, null]);
  expect(await logOf(unsent.delivery.event_id)).toEqual([]);
  expect(await logOf(sent.delivery.event_id)).toEqual([[1, 200, null]]);
});
