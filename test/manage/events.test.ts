/**
 * The event address, its secrets, test deliveries, automatic disabling, the delivery log and a
 * conversation's timeline over /manage/v1, against a real local HTTPS receiver and real workers.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { answer, deliveryEnv, Receiver, signatureValid, startReceiver, waitFor, workerPool } from '../webhooks/helpers';
import { M, manageHarness, newMember } from './helpers';
import { verifySignedDelivery } from '../../sdk/src/webhooks';
import { SWITCH_SETTLE_MS } from '../../server/webhooks/address-rules';
import { removeExpiredDeliveryLog } from '../../server/webhooks/retention';
import { decrypt } from '../../server/platform/crypto';

let receiver: Receiver;
let h: Harness;
let offset = 0; // the services' clock, ahead of or behind the real one
const pool = workerPool(() => h);
let site: string;
let ownerToken: string;
let agentToken: string;
let agentId: string;
let otherSite: string;

const DAY = 24 * 3600_000;

function api(method: 'get' | 'put' | 'patch' | 'post', path: string, body?: object, token = ownerToken) {
  const r = request(h.app)[method](`${M}${path}`).set('Authorization', `Bearer ${token}`);
  return body ? r.send(body) : r;
}

async function tokenOf(accountId: string, email: string) {
  return (await h.runtime.services.accounts.tokens.create({ manager: { accountId, email, via: 'session' }, clientIp: null }, 'events test')).token;
}

/** A visitor writes; the ids of the events it emitted, once every one of them has a finished delivery. */
async function visitorEvent(visitor: string, done: 'delivered' | 'failed' = 'delivered') {
  const said = await h.visitorSay(site, visitor, `hello from ${visitor}`);
  const conversationId = said.conversation.id;
  // The events that went to the address (a delivery row is written with its event).
  const ids: string[] = (
    await h.runtime
      .db('events as e')
      .join('deliveries as d', 'd.event_id', 'e.id')
      .where({ 'e.conversation_id': conversationId })
      .orderBy('e.created_at')
      .select('e.id')
  ).map((r) => r.id);
  await waitFor(`deliveries of ${visitor} ${done}`, async () => (await h.runtime.db('deliveries').whereIn('event_id', ids)).every((r) => r.status === done));
  return { conversationId, ids };
}

const receivedFor = (eventId: string) => receiver.requests.filter((r) => r.headers['x-service-delivery'] === eventId);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await manageHarness({ env: deliveryEnv(receiver, { delaysMs: [50] }), onEvents: () => pool.wake(), now: () => Date.now() + offset });
  site = h.site.id;
  const owner = await newMember(h, site, 'owner@example.com', 'owner');
  const agent = await newMember(h, site, 'agent@example.com', 'agent');
  ownerToken = await tokenOf(owner.id, owner.email);
  agentToken = await tokenOf(agent.id, agent.email);
  agentId = agent.id;
  otherSite = (await h.newSite('other')).id;
  pool.start();
});

afterAll(async () => {
  await pool.stopAll();
  await h.close();
  await receiver.close();
});

let secret: string;

test('an owner sets the address (the secret once), reads it, changes it; an agent is refused; another site is 404', async () => {
  // No address yet is a normal state: 200 with data null (a page reading it logs no failed request).
  const none = await api('get', `/sites/${site}/event-address`);
  expect(none.status).toBe(200);
  expect(none.body).toEqual({ data: null });
  expect((await api('get', `/sites/${site}/event-address`, undefined, agentToken)).status).toBe(403);
  const made = await api('put', `/sites/${site}/event-address`, { url: receiver.url('/hooks'), events: ['message.created', 'conversation.started'] });
  expect(made.status).toBe(201);
  expect(made.body.data.secret).toMatch(/^whsec_/);
  secret = made.body.data.secret;
  expect(made.body.data.address.events).toEqual(['conversation.started', 'message.created']);

  const again = await api('put', `/sites/${site}/event-address`, { url: receiver.url('/hooks') });
  expect(again.status).toBe(200);
  expect(again.body.data.secret).toBeNull();
  expect(again.body.data.address.events).toEqual(['conversation.started', 'message.created', 'conversation.closed']);

  const read = await api('get', `/sites/${site}/event-address`);
  expect(read.status).toBe(200);
  expect(read.body.data).toMatchObject({ state: 'enabled', disabledReason: null, failedDeliveries: 0, secretRoll: null });
  expect(JSON.stringify(read.body)).not.toContain('whsec_');

  const byAgent = await api('get', `/sites/${site}/event-address`, undefined, agentToken);
  expect(byAgent.status).toBe(403);
  expect(byAgent.body.error.code).toBe('forbidden');
  expect((await api('put', `/sites/${site}/event-address`, { url: receiver.url('/x') }, agentToken)).status).toBe(403);
  expect((await api('post', `/sites/${site}/event-address/secret/roll`, {}, agentToken)).status).toBe(403);
  expect((await api('get', `/sites/${site}/deliveries`, undefined, agentToken)).status).toBe(403);
  expect((await api('get', `/sites/${otherSite}/event-address`)).status).toBe(404);
});

test('a failing receiver shows failed attempts with status, answer and duration; fixed, a redelivery is delivered', async () => {
  receiver.on('/failing', answer(500, 'receiver broke: ' + 'x'.repeat(2000)));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/failing'), events: ['message.created'] });
  const { ids } = await visitorEvent('v-failing', 'failed');
  const [eventId] = ids.filter((id) => id.startsWith('message.created'));

  const failed = await api('get', `/sites/${site}/deliveries?outcome=failed`);
  expect(failed.status).toBe(200);
  expect(failed.body.data.map((d: { eventId: string }) => d.eventId)).toContain(eventId);

  const one = await api('get', `/sites/${site}/deliveries/${encodeURIComponent(eventId)}`);
  expect(one.status).toBe(200);
  const d = one.body.data;
  expect(d.delivery).toMatchObject({ eventId, event: 'message.created', outcome: 'failed', attempts: 2, test: false });
  expect(JSON.parse(d.requestBody).id).toBe(eventId);
  expect(d.attempts).toHaveLength(2);
  for (const a of d.attempts) {
    expect(a.status).toBe(500);
    expect(a.response.startsWith('receiver broke: ')).toBe(true);
    expect(a.response.length).toBeLessThanOrEqual(1024);
    expect(typeof a.durationMs).toBe('number');
    expect(a.requestHeaders['X-Service-Delivery']).toBe(eventId);
    expect(a.requestHeaders['X-Service-Signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
  }
  expect(JSON.stringify(d)).not.toContain(secret);

  receiver.on('/failing', answer(200, 'ok now'));
  const again = await api('post', `/sites/${site}/deliveries/${encodeURIComponent(eventId)}/redeliver`);
  expect(again.status).toBe(202);
  expect(again.body.data.eventIds).toEqual([eventId]);
  await waitFor('the redelivery', async () => (await h.runtime.db('deliveries').where({ event_id: eventId }).first()).status === 'delivered');
  const after = await api('get', `/sites/${site}/deliveries/${encodeURIComponent(eventId)}`);
  expect(after.body.data.delivery.outcome).toBe('delivered');
  expect(after.body.data.attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status])).toEqual([
    [1, 500],
    [2, 500],
    [3, 200],
  ]);
});

test('recover: the count of failed deliveries first, then one POST sends them all again', async () => {
  receiver.on('/down', answer(503, 'down'));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/down'), events: ['message.created'] });
  const since = new Date(Date.now() + offset).toISOString();
  const a = await visitorEvent('v-recover-1', 'failed');
  const b = await visitorEvent('v-recover-2', 'failed');
  const count = await api('get', `/sites/${site}/delivery-recovery?since=${encodeURIComponent(since)}`);
  expect(count.status).toBe(200);
  expect(count.body.data).toEqual({ since, failed: 2 });

  receiver.on('/down', answer(204));
  const recovered = await api('post', `/sites/${site}/delivery-recovery`, { since });
  expect(recovered.status).toBe(202);
  expect(recovered.body.data.eventIds.sort()).toEqual([...a.ids, ...b.ids].filter((id) => id.startsWith('message.created')).sort());
  await waitFor('the recovery', async () => (await api('get', `/sites/${site}/delivery-recovery?since=${encodeURIComponent(since)}`)).body.data.failed === 0);
});

test('the planned roll: old secret before the switch, new after; a receiver with both verifies every delivery', async () => {
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/roll'), events: ['message.created'] });
  const rolled = await api('post', `/sites/${site}/event-address/secret/roll`, {});
  expect(rolled.status).toBe(200);
  const next: string = rolled.body.data.secret;
  expect(next).toMatch(/^whsec_/);
  expect(Date.parse(rolled.body.data.switchAt) - (Date.now() + offset)).toBeGreaterThan(24 * 3600_000 - 60_000);
  expect((await api('get', `/sites/${site}/event-address`)).body.data.secretRoll).toEqual({ switchAt: rolled.body.data.switchAt });

  const before = (await visitorEvent('v-roll-before')).ids.filter((id) => id.startsWith('message.created'));
  // 24 hours pass: the switch time is reached.
  await h.runtime
    .db('webhook_endpoints')
    .where({ site_id: site })
    .update({ secret_switch_at: Date.now() - 1 });
  const after = (await visitorEvent('v-roll-after')).ids.filter((id) => id.startsWith('message.created'));

  for (const id of before) {
    const [r] = receivedFor(id);
    expect(signatureValid(secret, r.headers, r.body)).toBe(true);
    expect(signatureValid(next, r.headers, r.body)).toBe(false);
  }
  for (const id of after) {
    const [r] = receivedFor(id);
    expect(signatureValid(next, r.headers, r.body)).toBe(true);
    expect(signatureValid(secret, r.headers, r.body)).toBe(false);
  }
  for (const id of [...before, ...after]) {
    const [r] = receivedFor(id);
    const event = await verifySignedDelivery({ secrets: [secret, next], headers: r.headers as Record<string, string>, rawBody: r.body });
    expect(event.id).toBe(id);
  }
  // The old secret is dropped once the switch has come: by the hourly housekeeping (or a read of the address).
  await removeExpiredDeliveryLog(h.runtime.services.stores.events, Date.now());
  const row = await h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
  expect(row.secret_next_encrypted).toBeNull();
  expect(row.secret_switch_at).toBeNull();
  expect(decrypt(h.runtime.services.keys.webhookSecrets, row.secret_encrypted)).toBe(next);
  expect((await api('get', `/sites/${site}/event-address`)).body.data.secretRoll).toBeNull();
  secret = next;
});

test('switch now: a pending roll switches within the settle time, answered as switchAt', async () => {
  const rolled = await api('post', `/sites/${site}/event-address/secret/roll`, { switchInHours: 48 });
  const next: string = rolled.body.data.secret;
  // The services' clock runs SWITCH_SETTLE_MS behind, so the answered switch time is the real now.
  offset = -SWITCH_SETTLE_MS;
  try {
    const before = Date.now();
    const switched = await api('post', `/sites/${site}/event-address/secret/switch`);
    const after = Date.now();
    expect(switched.status).toBe(200);
    // The services' now plus the settle time: a real time taken during the call.
    expect(Date.parse(switched.body.data.switchAt)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(switched.body.data.switchAt)).toBeLessThanOrEqual(after);
  } finally {
    offset = 0;
  }
  await new Promise((r) => setTimeout(r, 50));
  const [id] = (await visitorEvent('v-switch')).ids.filter((x) => x.startsWith('message.created'));
  const [r] = receivedFor(id);
  expect(signatureValid(next, r.headers, r.body)).toBe(true);
  expect(signatureValid(secret, r.headers, r.body)).toBe(false);
  expect((await api('post', `/sites/${site}/event-address/secret/switch`)).status).toBe(400); // none pending
  secret = next;
});

test('a roll while one is pending is 409 (API and CLI alike); cancelling drops the new secret and the current one keeps signing', async () => {
  const roll = `/sites/${site}/event-address/secret/roll`;
  const first = await api('post', roll, { switchInHours: 48 });
  expect(first.status).toBe(200);
  const pending: string = first.body.data.secret;

  const again = await api('post', roll, {});
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('conflict');
  expect(again.body.error.message).toContain(`pending until ${first.body.data.switchAt}`);
  // The CLI's `webhook roll-secret` is the same service call: the same refusal.
  await expect(h.runtime.services.webhooks.rollSecret(site)).rejects.toMatchObject({ code: 'conflict', status: 409 });
  // Nothing was replaced: the pending secret is still the one first answered.
  const row = await h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
  expect(decrypt(h.runtime.services.keys.webhookSecrets, row.secret_next_encrypted)).toBe(pending);
  expect(Number(row.secret_switch_at)).toBe(Date.parse(first.body.data.switchAt));

  // Two rolls at once after a cancel: one starts, the other is refused.
  expect((await request(h.app).delete(`${M}${roll}`).set('Authorization', `Bearer ${agentToken}`)).status).toBe(403);
  const cancelled = await request(h.app).delete(`${M}${roll}`).set('Authorization', `Bearer ${ownerToken}`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.data.secretRoll).toBeNull();
  expect((await api('get', `/sites/${site}/event-address`)).body.data.secretRoll).toBeNull();
  expect((await request(h.app).delete(`${M}${roll}`).set('Authorization', `Bearer ${ownerToken}`)).status).toBe(400); // none pending
  const race = await Promise.all([api('post', roll, {}), api('post', roll, {})]);
  expect(race.map((r) => r.status).sort()).toEqual([200, 409]);
  const winner: string = race.find((r) => r.status === 200)!.body.data.secret;
  const stored = await h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
  expect(decrypt(h.runtime.services.keys.webhookSecrets, stored.secret_next_encrypted)).toBe(winner);

  // Once switching (switch now), the roll can no longer be taken back.
  expect((await api('post', `/sites/${site}/event-address/secret/switch`)).status).toBe(200);
  const late = await request(h.app).delete(`${M}${roll}`).set('Authorization', `Bearer ${ownerToken}`);
  expect(late.status).toBe(409);
  expect(late.body.error.code).toBe('conflict');
  // Undo that switch for the tests below: a fresh secret at once.
  const rotated = await api('post', `/sites/${site}/event-address/secret/rotate`);
  secret = rotated.body.data.secret;

  // A cancelled roll's secret never signs: deliveries after the cancel carry the current secret.
  const cancelledRoll = await api('post', roll, { switchInHours: 1 });
  expect((await h.runtime.services.webhooks.cancelSecretRoll(site)).secretRoll).toBeNull(); // the CLI's `webhook cancel-roll`
  const [id] = (await visitorEvent('v-cancelled')).ids.filter((x) => x.startsWith('message.created'));
  const [r] = receivedFor(id);
  expect(signatureValid(secret, r.headers, r.body)).toBe(true);
  expect(signatureValid(cancelledRoll.body.data.secret, r.headers, r.body)).toBe(false);

  const actions = ((await api('get', `/sites/${site}/audit-log?limit=100`)).body.data as { action: string; actor: { type: string } }[])
    .filter((e) => e.action === 'event_address.secret_roll_cancelled')
    .map((e) => e.actor.type);
  expect(actions.sort()).toEqual(['operator', 'token']);
});

test('a signed test delivery: sent once, signed like a real one, in the log as a test, never redelivered or recovered', async () => {
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/test-ok'), events: ['message.created'] });
  const sent = await api('post', `/sites/${site}/event-address/test`, { event: 'conversation.closed' });
  expect(sent.status).toBe(200);
  expect(sent.body.data).toMatchObject({ event: 'conversation.closed', outcome: 'delivered', status: 200, error: null });
  const [r] = receivedFor(sent.body.data.eventId);
  expect(r.headers['x-service-event']).toBe('conversation.closed');
  expect(r.headers['x-service-attempt']).toBe('1');
  expect(signatureValid(secret, r.headers, r.body)).toBe(true);
  const event = await verifySignedDelivery({ secret, headers: r.headers as Record<string, string>, rawBody: r.body });
  expect(event.event).toBe('conversation.closed');
  expect(event.data.message).toBeNull();

  receiver.on('/test-bad', answer(418, 'teapot'));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/test-bad') });
  const since = new Date(Date.now() - 5000).toISOString();
  const bad = await api('post', `/sites/${site}/event-address/test`, { event: 'message.created' });
  expect(bad.body.data).toMatchObject({ outcome: 'failed', status: 418, response: 'teapot' });
  const listed = await api('get', `/sites/${site}/deliveries?outcome=failed&since=${encodeURIComponent(since)}`);
  expect(listed.body.data).toEqual([expect.objectContaining({ eventId: bad.body.data.eventId, test: true, attempts: 1 })]);
  expect((await api('get', `/sites/${site}/delivery-recovery?since=${encodeURIComponent(since)}`)).body.data.failed).toBe(0);
  expect((await api('post', `/sites/${site}/deliveries/${encodeURIComponent(bad.body.data.eventId)}/redeliver`)).status).toBe(400);
  expect((await h.runtime.db('webhook_endpoints').where({ site_id: site }).first()).failure_streak).toBe(0);
});

test('persistent failure disables the address (audited as the service); deliveries then fail unsent; enabling resets it', async () => {
  receiver.on('/gone', answer(410, 'gone'));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/gone'), events: ['message.created'] });
  // Five days and nine failed deliveries have passed (a fake clock for the streak's start).
  await h.runtime
    .db('webhook_endpoints')
    .where({ site_id: site })
    .update({ failing_since: Date.now() - 5 * DAY - 1000, failure_streak: 9 });
  await visitorEvent('v-gone', 'failed');
  let state: Record<string, unknown> = {};
  await waitFor('the automatic disabling', async () => {
    state = (await api('get', `/sites/${site}/event-address`)).body.data;
    return state.state === 'disabled';
  });
  expect(state).toMatchObject({ disabledReason: 'failing', failedDeliveries: 10 });
  expect(state.disabledAt).not.toBeNull();

  const sentBefore = receiver.at('/gone').length;
  const { ids } = await visitorEvent('v-while-disabled', 'failed');
  expect(receiver.at('/gone').length).toBe(sentBefore);
  expect(await h.runtime.db('delivery_attempts').whereIn('event_id', ids)).toHaveLength(0);

  const enabled = await api('patch', `/sites/${site}/event-address`, { enabled: true });
  expect(enabled.status).toBe(200);
  expect(enabled.body.data).toMatchObject({ state: 'enabled', disabledReason: null, failingSince: null, failedDeliveries: 0 });
  const off = await api('patch', `/sites/${site}/event-address`, { enabled: false });
  expect(off.body.data).toMatchObject({ state: 'disabled', disabledReason: 'owner' });
  await api('patch', `/sites/${site}/event-address`, { enabled: true });

  const audit = (await api('get', `/sites/${site}/audit-log?limit=100`)).body.data as {
    action: string;
    actor: { type: string };
    clientAddress: string | null;
    objectId: string;
  }[];
  const auto = audit.find((e) => e.action === 'event_address.disabled.failing')!;
  expect(auto.actor.type).toBe('operator');
  expect(auto.objectId).toBe(state.id);
});

test('filters and keyset paging of the delivery log', async () => {
  receiver.on('/all', answer(200));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/all') });
  const since = new Date(Date.now() - 1).toISOString();
  const { ids } = await visitorEvent('v-filters');
  const until = new Date(Date.now() + 1000).toISOString();
  const all = await api('get', `/sites/${site}/deliveries?since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`);
  expect(all.body.data.map((d: { eventId: string }) => d.eventId).sort()).toEqual([...ids].sort());
  const started = await api('get', `/sites/${site}/deliveries?event=conversation.started&since=${encodeURIComponent(since)}`);
  expect(started.body.data.map((d: { event: string }) => d.event)).toEqual(['conversation.started']);
  expect((await api('get', `/sites/${site}/deliveries?outcome=pending&since=${encodeURIComponent(since)}`)).body.data).toEqual([]);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res: request.Response = await api('get', `/sites/${site}/deliveries?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    seen.push(...res.body.data.map((d: { eventId: string }) => d.eventId));
    cursor = res.body.page.nextCursor;
  } while (cursor);
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen.length).toBe(
    await h.runtime
      .db('deliveries')
      .where({ site_id: site })
      .count({ n: '*' })
      .first()
      .then((r) => Number(r!.n)),
  );
  expect((await api('get', `/sites/${site}/deliveries?limit=2&cursor=${encodeURIComponent(String(all.body.page.nextCursor ?? 'x.y'))}`)).status).toBe(400);
});

test("a conversation's timeline: messages with their authors, the events they emitted and every attempt, in order; agents read it", async () => {
  receiver.on('/timeline', answer(200));
  await api('put', `/sites/${site}/event-address`, { url: receiver.url('/timeline') });
  const { conversationId } = await visitorEvent('v-timeline');
  const key = await h.runtime.services.access.createKey(site, ['conversations:read', 'conversations:write'], 'support bot');
  const reply = await request(h.app)
    .post(`/api/v1/conversations/${conversationId}/messages`)
    .set('Authorization', `Bearer ${key.key}`)
    .send({ content: 'How can I help?' });
  expect(reply.status).toBe(201);
  const fromInbox = await api('post', `/sites/${site}/inbox/conversations/${conversationId}/messages`, { content: 'I am on it.' }, agentToken);
  expect(fromInbox.status).toBe(201);
  await waitFor(
    'the timeline deliveries',
    async () =>
      (await h.runtime.db('delivery_attempts').where('event_id', 'like', 'message.created:%').andWhere({ site_id: site })).length >= 3 &&
      (await h.runtime.db('deliveries').where({ site_id: site, status: 'pending' })).length === 0,
  );

  const res = await api('get', `/sites/${site}/conversations/${conversationId}/timeline`, undefined, agentToken);
  expect(res.status).toBe(200);
  const entries = res.body.data as {
    type: string;
    at: string;
    author?: { type: string; apiKeyLabel: string | null; accountId: string | null };
    eventId?: string;
    event?: string;
    messageId?: string;
  }[];
  expect(entries.filter((e) => e.type === 'message').map((e) => [e.author!.type, e.author!.apiKeyLabel, e.author!.accountId])).toEqual([
    ['visitor', null, null],
    ['api_key', 'support bot', null],
    ['member', null, agentId],
  ]);
  expect(entries.filter((e) => e.type === 'event').map((e) => e.event)).toEqual([
    'conversation.started',
    'message.created',
    'message.created',
    'message.created',
  ]);
  expect(entries.filter((e) => e.type === 'attempt')).toHaveLength(4);
  // Sorted by time; each event after its message, each attempt after its event.
  const times = entries.map((e) => Date.parse(e.at));
  expect([...times].sort((a, b) => a - b)).toEqual(times);
  for (const [i, e] of entries.entries()) {
    if (e.type === 'event' && e.messageId) expect(entries.slice(0, i).some((m) => m.type === 'message' && m.messageId === e.messageId)).toBe(true);
    if (e.type === 'attempt') expect(entries.slice(0, i).some((x) => x.type === 'event' && x.eventId === e.eventId)).toBe(true);
  }
  expect((await api('get', `/sites/${otherSite}/conversations/${conversationId}/timeline`)).status).toBe(404);
  expect((await api('get', `/sites/${site}/conversations/conv_00000000000000000000000000/timeline`)).status).toBe(404);

  // One message a page: three pages, each in time order, holding together every entry of the whole
  // timeline once. An attempt stays on its event's page even when it came after the next page's
  // first message (the API reply's delivery may finish after the member's reply), so the pages
  // joined need not be one time order.
  const paged: { at: string }[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page = await api('get', `/sites/${site}/conversations/${conversationId}/timeline?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    expect(page.body.data.filter((e: { type: string }) => e.type === 'message')).toHaveLength(1);
    const pageTimes = page.body.data.map((e: { at: string }) => Date.parse(e.at));
    expect([...pageTimes].sort((a, b) => a - b)).toEqual(pageTimes);
    paged.push(...page.body.data);
    cursor = page.body.page.nextCursor;
    pages++;
  } while (cursor && pages < 5);
  expect(pages).toBe(3);
  const asText = (e: object) => JSON.stringify(e);
  expect(paged.map(asText).sort()).toEqual(entries.map(asText).sort());
});

test("another site's delivery is 404; the changes are in the audit log with actor and client address", async () => {
  const [theirs] = (await h.runtime.db('events').where({ site_id: site }).limit(1).select('id')).map((r) => r.id);
  const stranger = await newMember(h, otherSite, 'stranger@example.com', 'owner');
  const strangerToken = await tokenOf(stranger.id, stranger.email);
  expect((await api('get', `/sites/${otherSite}/deliveries/${encodeURIComponent(theirs)}`, undefined, strangerToken)).status).toBe(404);
  expect((await api('post', `/sites/${otherSite}/deliveries/${encodeURIComponent(theirs)}/redeliver`, undefined, strangerToken)).status).toBe(404);
  expect((await api('get', `/sites/${site}/deliveries/${encodeURIComponent(theirs)}`, undefined, strangerToken)).status).toBe(404);

  const audit = (await api('get', `/sites/${site}/audit-log?limit=100`)).body.data as {
    action: string;
    actor: { type: string; tokenId: string | null };
    clientAddress: string | null;
  }[];
  const actions = new Set(audit.map((e) => e.action));
  for (const a of [
    'event_address.created',
    'event_address.updated',
    'event_address.secret_roll_started',
    'event_address.secret_switched',
    'event_address.test_sent',
    'event_address.enabled',
    'event_address.disabled',
    'delivery.redelivered',
    'delivery.recovered',
  ]) {
    expect(actions).toContain(a);
  }
  const mine = audit.find((e) => e.action === 'event_address.secret_roll_started')!;
  expect(mine.actor.type).toBe('token');
  expect(mine.clientAddress).toBeTruthy();
});
