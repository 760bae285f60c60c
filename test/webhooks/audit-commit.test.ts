/**
 * The audit entries of event delivery's changes commit with the change or not at all: with the
 * audit log's table out of reach the entry's insert fails, and each change must then be undone
 * (redelivery, recovery, a test delivery's record, the automatic disabling); with it back, both land.
 */
import { answer, captureLogger, deliveryOf, waitFor } from './helpers';
import { ownerDeliverySuite } from './owner-suite';

const suite = ownerDeliverySuite();
const { api, pool } = suite;

const DAY = 24 * 3600_000;

/** Runs `during` while the audit log's table is renamed away, so every entry's insert fails. */
async function withoutAuditLog<T>(during: () => Promise<T>): Promise<T> {
  await suite.h.runtime.db.schema.renameTable('audit_log', 'audit_log_away');
  try {
    return await during();
  } finally {
    await suite.h.runtime.db.schema.renameTable('audit_log_away', 'audit_log');
  }
}

const entries = (siteId: string, action: string) =>
  suite.h.runtime.db('audit_log').where({ site_id: siteId, action }).select('object_id', 'actor_account_id', 'actor_token_id');

/** A site of the owner's with its address at `path` of the receiver (answering 410: failed at once, not retried). */
async function siteFailingAt(path: string) {
  const site = (await suite.h.newSite(path)).id;
  await suite.h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, site, 'owner@example.com', 'owner');
  suite.receiver.on(path, answer(410, 'gone'));
  await api('put', `/sites/${site}/event-address`, { url: suite.receiver.url(path), events: ['message.created'] });
  return site;
}

const failedEvent = (siteId: string, visitor: string) => suite.messageEvent(siteId, visitor, 'failed');

test('delivery.redelivered: an entry that cannot be written leaves the delivery failed; written, it commits with the redelivery', async () => {
  const site = await siteFailingAt('/audit-redeliver');
  const id = await failedEvent(site, 'v-redeliver');
  const path = `/sites/${site}/deliveries/${encodeURIComponent(id)}/redeliver`;

  const refused = await withoutAuditLog(() => api('post', path));
  expect(refused.status).toBe(500);
  expect(refused.body.error.code).toBe('internal_error');
  expect(await deliveryOf(suite.h, id)).toMatchObject({ status: 'failed', round_base: 0 });
  expect(await entries(site, 'delivery.redelivered')).toEqual([]);

  expect((await api('post', path)).status).toBe(202);
  expect(Number((await deliveryOf(suite.h, id)).round_base)).toBe(1);
  expect(await entries(site, 'delivery.redelivered')).toEqual([{ object_id: id, actor_account_id: suite.owner.id, actor_token_id: expect.any(String) }]);
  // The CLI's `webhook redeliver --event` is audited as the operator, in the same way.
  await waitFor('the redelivery', async () => (await deliveryOf(suite.h, id)).status === 'failed' && Number((await deliveryOf(suite.h, id)).attempts) === 2);
  // (The driver's error, not toThrow: better-sqlite3's error class belongs to the realm of the first test file that loaded it.)
  await expect(withoutAuditLog(() => suite.h.runtime.services.webhooks.redeliverEvent(id))).rejects.toHaveProperty(
    'message',
    expect.stringContaining('audit_log'),
  );
  expect(Number((await deliveryOf(suite.h, id)).round_base)).toBe(1);
  expect(await suite.h.runtime.services.webhooks.redeliverEvent(id)).toEqual([id]);
  expect((await entries(site, 'delivery.redelivered')).filter((e) => e.actor_account_id === null)).toEqual([
    { object_id: id, actor_account_id: null, actor_token_id: null },
  ]);
});

test('delivery.recovered: an entry that cannot be written leaves every delivery failed; written, it commits with the recovery', async () => {
  const site = await siteFailingAt('/audit-recover');
  const since = new Date(Date.now() - 1000).toISOString();
  const ids = [await failedEvent(site, 'v-recover-1'), await failedEvent(site, 'v-recover-2')];
  const endpointId = (await suite.h.runtime.db('webhook_endpoints').where({ site_id: site }).first()).id;

  const refused = await withoutAuditLog(() => api('post', `/sites/${site}/delivery-recovery`, { since }));
  expect(refused.status).toBe(500);
  for (const id of ids) expect(await deliveryOf(suite.h, id)).toMatchObject({ status: 'failed', round_base: 0 });
  expect((await api('get', `/sites/${site}/delivery-recovery?since=${encodeURIComponent(since)}`)).body.data.failed).toBe(2);
  expect(await entries(site, 'delivery.recovered')).toEqual([]);

  const recovered = await api('post', `/sites/${site}/delivery-recovery`, { since });
  expect(recovered.status).toBe(202);
  expect(recovered.body.data.eventIds).toEqual(ids);
  for (const id of ids) expect(Number((await deliveryOf(suite.h, id)).round_base)).toBe(1);
  expect(await entries(site, 'delivery.recovered')).toEqual([{ object_id: endpointId, actor_account_id: suite.owner.id, actor_token_id: expect.any(String) }]);
});

test('event_address.test_sent: the test is sent, but an entry that cannot be written leaves no record of it; written, both land', async () => {
  const site = await siteFailingAt('/audit-test');
  suite.receiver.on('/audit-test', answer(200, 'ok'));
  const testsOf = () => suite.h.runtime.db('deliveries').where({ site_id: site, test: true }).select('event_id');

  const refused = await withoutAuditLog(() => api('post', `/sites/${site}/event-address/test`, { event: 'message.created' }));
  expect(refused.status).toBe(500);
  // The request went out (a send is not undone: docs/manage.md), but neither the log nor the audit log names it.
  const [sent] = suite.receiver.at('/audit-test');
  expect(sent.headers['x-service-delivery']).toEqual(expect.stringMatching(/^message\.created:/));
  expect(await testsOf()).toEqual([]);
  expect(await suite.h.runtime.db('events').where({ id: sent.headers['x-service-delivery'] })).toEqual([]);
  expect(await suite.h.runtime.db('delivery_attempts').where({ site_id: site })).toEqual([]);
  expect(await entries(site, 'event_address.test_sent')).toEqual([]);

  const ok = await api('post', `/sites/${site}/event-address/test`, { event: 'message.created' });
  expect(ok.status).toBe(200);
  expect(await testsOf()).toEqual([{ event_id: ok.body.data.eventId }]);
  expect(await entries(site, 'event_address.test_sent')).toEqual([
    { object_id: ok.body.data.eventId, actor_account_id: suite.owner.id, actor_token_id: expect.any(String) },
  ]);
});

test('event_address.disabled.failing: an entry that cannot be written leaves the address enabled; written, it commits with the disabling', async () => {
  const site = await siteFailingAt('/audit-disable');
  const endpoint = () => suite.h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
  // Five days and nine failed deliveries have passed: the next failure disables the address.
  await suite.h.runtime
    .db('webhook_endpoints')
    .where({ site_id: site })
    .update({ failing_since: Date.now() - 5 * DAY - 1000, failure_streak: 9 });
  // A worker of its own, whose log tells when the rule ran.
  await pool.stopAll();
  const log = captureLogger();
  pool.start({}, { logger: log.logger });

  await withoutAuditLog(async () => {
    await failedEvent(site, 'v-disable-1');
    await waitFor('the rule to have run', () => log.text().includes('the failure streak could not be written'));
  });
  expect(await endpoint()).toMatchObject({ disabled_at: null, disabled_reason: null });
  expect(await entries(site, 'event_address.disabled.failing')).toEqual([]);

  await failedEvent(site, 'v-disable-2');
  await waitFor('the automatic disabling', async () => (await endpoint()).disabled_reason === 'failing');
  expect(await entries(site, 'event_address.disabled.failing')).toEqual([{ object_id: (await endpoint()).id, actor_account_id: null, actor_token_id: null }]);
});
