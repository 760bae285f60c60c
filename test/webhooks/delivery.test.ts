import fs from 'node:fs';
import path from 'node:path';
import type { ServerResponse } from 'node:http';
import request from 'supertest';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { Harness, bearer } from '../helpers/harness';
import { retriesByTimerOnly } from '../helpers/retry-timer';
import { EVENT_NAMES } from '../../server/webhooks/outbox';
import {
  answer,
  attemptsOf,
  captureLogger,
  deliveryOf,
  eventIdsOf,
  Receiver,
  reset,
  signatureValid,
  stall,
  startReceiver,
  waitFor,
  webhooks,
  workerPool,
  deliveryHarness,
} from './helpers';

/**
 * Deliveries against a real HTTPS receiver on localhost (its self-signed certificate is the only
 * extra CA, through WEBHOOK_CA_FILE). Pauses are shortened to 300 ms and 600 ms and the time-out
 * to 1.5 s; the real 5 s / 10 s schedule has its own test file.
 */
const DELAYS = [300, 600];
const TIMEOUT_MS = 1500;

let receiver: Receiver;
let h: Harness;
const workers = workerPool(() => h);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, { timeoutMs: TIMEOUT_MS, delaysMs: DELAYS, onEvents: () => workers.wake() });
});
afterEach(() => workers.stopAll());
afterAll(async () => {
  await h.close();
  await receiver.close();
});

/** A fresh site whose address is its own path on the receiver. */
async function siteWithAddress(name: string, events?: string) {
  const site = await h.newSite(name);
  const endpoint = await webhooks(h).setEndpoint(site.id, receiver.url(`/${name}`), events);
  return { site, secret: endpoint.secret!, path: `/${name}` };
}

async function finished(eventId: string) {
  await waitFor(`${eventId} finished`, async () => ['delivered', 'failed'].includes((await deliveryOf(h, eventId))?.status));
  return deliveryOf(h, eventId);
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const validators = Object.fromEntries(
  EVENT_NAMES.map((name) => [name, ajv.compile(JSON.parse(fs.readFileSync(path.resolve(__dirname, `../../sdk/schemas/${name}.json`), 'utf8')))]),
);

const withoutUrls = (message: Record<string, unknown>) => ({
  ...message,
  attachments: (message.attachments as Record<string, unknown>[]).map(({ url, ...rest }) => {
    expect(url).toMatch(/^https:\/\/localhost:8443\/api\/v1\/media\/med_[0-9a-z]{26}\?expires=\d+&signature=[0-9a-f]{64}$/);
    return rest;
  }),
});

describe('what arrives', () => {
  test('a visitor message with a file, an API reply and a close arrive once each, signed, matching the schemas and the API', async () => {
    workers.start();
    const { site, secret, path: p } = await siteWithAddress('flow');
    const said = await h.runtime.services.window.chat.visitorSay(site.id, 'visitor-1', 'Hello — ünïcödé ✓ "quotes"', {
      files: [{ buffer: Buffer.from('a small file'), originalName: 'note.txt', mimeType: 'text/plain' }],
    });
    const conv = said.conversation.id;
    const reply = await request(h.app).post(`/api/v1/conversations/${conv}/messages`).set(bearer(site.key)).send({ content: 'Hi, how can I help?' });
    expect(reply.status).toBe(201);
    const closed = await request(h.app).post(`/api/v1/conversations/${conv}/close`).set(bearer(site.key));
    expect(closed.status).toBe(200);

    await waitFor('four deliveries', () => receiver.at(p).length >= 4);
    const got = receiver.at(p);
    const names = got.map((r) => r.json.event).sort();
    expect(names).toEqual(['conversation.closed', 'conversation.started', 'message.created', 'message.created']);

    const stored = await h.runtime.db('events').where({ site_id: site.id });
    expect(stored).toHaveLength(4);
    const listed = await request(h.app).get(`/api/v1/conversations/${conv}/messages`).set(bearer(site.key));
    expect(listed.status).toBe(200);
    const apiMessages = new Map<string, Record<string, unknown>>(listed.body.data.map((m: { id: string }) => [m.id, m]));

    for (const r of got) {
      // Headers exactly as the `webhooks` section of openapi/openapi.yaml declares them.
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['x-service-event']).toBe(r.json.event);
      expect(r.headers['x-service-delivery']).toBe(r.json.id);
      expect(r.headers['x-service-attempt']).toBe('1');
      expect(r.headers['x-service-timestamp']).toMatch(/^\d+$/);
      expect(Math.abs(Number(r.headers['x-service-timestamp']) - r.at / 1000)).toBeLessThanOrEqual(300);
      expect(r.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(signatureValid(secret, r.headers, r.body)).toBe(true);
      expect(signatureValid('whsec_not-the-secret', r.headers, r.body)).toBe(false);

      // The body is the outbox's bytes, unchanged.
      const row = stored.find((e) => e.id === r.json.id);
      expect(r.body.equals(Buffer.from(row.body, 'utf8'))).toBe(true);

      // The envelope.
      expect(r.json.id).toMatch(new RegExp(`^${r.json.event.replace('.', '\\.')}:[0-9a-z]{26}$`));
      expect(r.json.workspaceKey).toBe(site.id);
      expect(r.json.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const validate = validators[r.json.event];
      expect(validate(r.json) ? [] : validate.errors).toEqual([]);

      // data.message is what GET .../messages answers for it (the signed link's expiry aside).
      const message = r.json.data.message;
      if (r.json.event === 'conversation.closed') {
        expect(message).toBeNull();
        expect(r.json.data.conversation).toEqual(closed.body.data);
      } else {
        expect(message).not.toBeNull();
        expect(withoutUrls(message!)).toEqual(withoutUrls(apiMessages.get(message!.id as string)!));
      }
    }
    // conversation.started carries the first message, with its attachment.
    const started = got.find((r) => r.json.event === 'conversation.started')!;
    expect(started.json.data.message!.id).toBe(said.message.id);
    expect((started.json.data.message!.attachments as unknown[]).length).toBe(1);
    // The reply's event carries origin and the key that wrote it (loop protection).
    const replyEvent = got.find((r) => r.json.data.message?.id === reply.body.data.id)!;
    expect(replyEvent.json.data.message).toMatchObject({ origin: 'api', apiKeyId: site.keyId, direction: 'outgoing' });
    // Every delivery is logged as one 200 attempt.
    for (const r of got) {
      const log = await attemptsOf(h, r.json.id);
      expect(log.map((a) => [a.attempt, a.status_code, a.error])).toEqual([[1, 200, null]]);
      expect(log[0].response_excerpt).toBe('ok');
      expect(log[0].url).toBe(receiver.url(p));
    }
  });

  test('only the subscribed events are sent', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('closed-only', 'conversation.closed');
    const said = await h.visitorSay(site.id, 'v', 'hello');
    await h.runtime.services.conversations.close(site.id, said.conversation.id);
    await waitFor('the close event', () => receiver.at(p).length >= 1);
    const [closedId] = await eventIdsOf(h, site.id, 'conversation.closed');
    expect(await finished(closedId)).toMatchObject({ status: 'delivered' });
    // The other two events exist in the outbox but were never queued, so they can never be sent.
    expect(await eventIdsOf(h, site.id)).toHaveLength(3);
    expect(await h.runtime.db('deliveries').where({ site_id: site.id }).select('event_id')).toEqual([{ event_id: closedId }]);
    expect(receiver.at(p).map((r) => r.json.event)).toEqual(['conversation.closed']);
  });
});

describe('answers and failures', () => {
  test('a 4xx is logged and not retried', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('gone');
    receiver.on(p, answer(410, 'no such hook'));
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(receiver.at(p).filter((r) => r.json.id === id)).toHaveLength(1);
    const log = await attemptsOf(h, id);
    expect(log.map((a) => [a.attempt, a.status_code, a.error, a.response_excerpt])).toEqual([[1, 410, null, 'no such hook']]);
  });

  test('a 3xx is not followed and not retried', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('moved');
    receiver.on(p, answer(307, 'moved', { Location: receiver.url('/moved-target') }));
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const ids = await eventIdsOf(h, site.id);
    for (const id of ids) expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(receiver.at('/moved-target')).toHaveLength(0);
    expect(receiver.at(p)).toHaveLength(ids.length);
    for (const id of ids) expect((await attemptsOf(h, id)).map((a) => [a.status_code, a.error])).toEqual([[307, 'redirect not followed']]);
  });

  test('a 5xx is retried after the configured pauses, by the retry timer: three attempts in all, same id and body, each signed afresh and logged', async () => {
    const byTimer = retriesByTimerOnly(h.runtime.services);
    workers.start({}, byTimer.options);
    const { site, secret, path: p } = await siteWithAddress('down');
    receiver.on(p, answer(503, 'try later'));
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 3 });

    const tries = receiver.at(p).filter((r) => r.json.id === id);
    expect(tries.map((r) => r.headers['x-service-attempt'])).toEqual(['1', '2', '3']);
    for (const r of tries) {
      expect(r.headers['x-service-delivery']).toBe(id);
      expect(r.body.equals(tries[0].body)).toBe(true);
      expect(signatureValid(secret, r.headers, r.body)).toBe(true);
    }
    // The pauses decided are exactly the configured ones, in order; the last attempt ends the delivery.
    expect(byTimer.decided.filter((d) => d.eventId === id).map((d) => [d.attempt, d.status, d.pauseMs])).toEqual([
      [1, 'pending', DELAYS[0]],
      [2, 'pending', DELAYS[1]],
      [3, 'failed', 0],
    ]);
    // As the receiver saw them: at least those pauses (the attempt itself takes a few ms more). That
    // the retries were not late is told by how they came: with the worker's poll an hour apart, only
    // its retry timer can have brought them within `finished`'s 15 s liveness bound.
    const gaps = [tries[1].at - tries[0].at, tries[2].at - tries[1].at];
    expect(gaps[0]).toBeGreaterThanOrEqual(DELAYS[0] - 20);
    expect(gaps[1]).toBeGreaterThanOrEqual(DELAYS[1] - 20);

    const log = await attemptsOf(h, id);
    expect(log.map((a) => [a.attempt, a.status_code, a.error, a.response_excerpt])).toEqual([
      [1, 503, null, 'try later'],
      [2, 503, null, 'try later'],
      [3, 503, null, 'try later'],
    ]);
    for (const a of log) {
      expect(Number(a.started_at)).toBeGreaterThan(0);
      expect(Number(a.duration_ms)).toBeGreaterThanOrEqual(0);
      expect(a.url).toBe(receiver.url(p));
      expect(a.event_name).toBe('message.created');
    }
  });

  test('a 5xx and then a 2xx: delivered on the second attempt', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('flaky', 'message.created');
    let calls = 0;
    receiver.on(p, (req, res) => (++calls === 1 ? answer(500, 'oops')(req, res, Buffer.alloc(0)) : answer(204)(req, res, Buffer.alloc(0))));
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'delivered', attempts: 2 });
    expect((await attemptsOf(h, id)).map((a) => a.status_code)).toEqual([500, 204]);
  });

  test('a dropped connection is retried up to three attempts', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('reset');
    receiver.on(p, reset);
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 3 });
    expect(receiver.at(p).filter((r) => r.json.id === id)).toHaveLength(3);
    expect((await attemptsOf(h, id)).map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, null, 'connection reset'],
      [2, null, 'connection reset'],
      [3, null, 'connection reset'],
    ]);
  });

  test('a receiver that never answers times out and is retried up to three attempts', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('silent', 'message.created');
    receiver.on(p, stall);
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 3 });
    const log = await attemptsOf(h, id);
    expect(log.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, null, `timeout after ${TIMEOUT_MS} ms`],
      [2, null, `timeout after ${TIMEOUT_MS} ms`],
      [3, null, `timeout after ${TIMEOUT_MS} ms`],
    ]);
    for (const a of log) expect(Number(a.duration_ms)).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  });

  test('a certificate that no trusted CA signed is rejected (and retried)', async () => {
    workers.start({ webhookCaFile: undefined }); // system CAs only
    const { site, path: p } = await siteWithAddress('untrusted', 'message.created');
    await h.runtime.services.window.chat.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 3 });
    expect(receiver.at(p)).toHaveLength(0); // the TLS handshake ended before any request
    expect((await attemptsOf(h, id)).map((a) => a.error)).toEqual(['certificate rejected', 'certificate rejected', 'certificate rejected']);
  });

  test('one slow address does not hold up other sites', async () => {
    workers.start({ webhookTimeoutMs: 10_000 });
    const slow = await siteWithAddress('slow', 'message.created');
    const held: ServerResponse[] = [];
    receiver.on(slow.path, (_req, res) => void held.push(res));
    for (let i = 0; i < 8; i++) await h.visitorSay(slow.site.id, `v${i}`, 'hi');
    await waitFor('the slow address to be busy', () => receiver.at(slow.path).length >= 4);
    const fast = await siteWithAddress('fast', 'message.created');
    await h.visitorSay(fast.site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, fast.site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'delivered' });
    // When the other site's event was delivered, not one attempt to the slow address had ended.
    expect(await h.runtime.db('delivery_attempts').where({ site_id: slow.site.id }).count({ n: '*' }).first()).toMatchObject({ n: 0 });
    // Nor did the slow address take every slot: at most 4 of its deliveries were in flight.
    expect(receiver.at(slow.path).length).toBeLessThanOrEqual(4);
    // Let the slow address answer now, so nothing is left in flight for later tests.
    receiver.on(slow.path, answer(200));
    for (const res of held) res.end();
    for (const slowId of await eventIdsOf(h, slow.site.id, 'message.created')) expect(await finished(slowId)).toMatchObject({ status: 'delivered' });
  });
});

describe('redelivery', () => {
  test('one event: same id and body, attempt numbers continue', async () => {
    workers.start();
    const { site, secret, path: p } = await siteWithAddress('redeliver-one', 'message.created');
    receiver.on(p, answer(400, 'bad'));
    await h.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 1 });

    receiver.on(p, answer(200, 'thanks'));
    expect(await webhooks(h).redeliverEvent(id)).toEqual([id]);
    await waitFor('the redelivery', () => receiver.at(p).length >= 2);
    expect(await finished(id)).toMatchObject({ status: 'delivered', attempts: 2 });
    const [first, second] = receiver.at(p);
    expect(second.headers['x-service-delivery']).toBe(id);
    expect(second.headers['x-service-attempt']).toBe('2');
    expect(second.body.equals(first.body)).toBe(true);
    expect(signatureValid(secret, second.headers, second.body)).toBe(true);
    expect((await attemptsOf(h, id)).map((a) => [a.attempt, a.status_code])).toEqual([
      [1, 400],
      [2, 200],
    ]);
  });

  test('every failed event since a time, each with a fresh budget of three attempts', async () => {
    workers.start();
    const { site, path: p } = await siteWithAddress('redeliver-many', 'message.created');
    receiver.on(p, answer(502));
    const since = Date.now();
    await h.visitorSay(site.id, 'v1', 'one');
    await h.visitorSay(site.id, 'v2', 'two');
    const ids = await eventIdsOf(h, site.id, 'message.created');
    for (const id of ids) expect(await finished(id)).toMatchObject({ status: 'failed', attempts: 3 });

    // Still failing once more, then fine: the fourth attempt fails, the fifth succeeds, which a
    // used-up budget would not allow.
    const seen = new Map<string, number>();
    receiver.on(p, (req, res, body) => {
      const id = JSON.parse(body.toString()).id as string;
      seen.set(id, (seen.get(id) ?? 0) + 1);
      answer(seen.get(id) === 1 ? 502 : 200)(req, res, body);
    });
    const redelivered = await webhooks(h).redeliverFailedSince(site.id, since);
    expect([...redelivered].sort()).toEqual([...ids].sort());
    for (const id of ids) {
      await waitFor(`${id} delivered`, async () => (await deliveryOf(h, id)).status === 'delivered');
      expect((await attemptsOf(h, id)).map((a) => [a.attempt, a.status_code])).toEqual([
        [1, 502],
        [2, 502],
        [3, 502],
        [4, 502],
        [5, 200],
      ]);
    }
    // A time after the events selects nothing.
    expect(await webhooks(h).redeliverFailedSince(site.id, Date.now() + 1000)).toEqual([]);
  });
});

describe('secrets', () => {
  test('a rotated secret signs the very next delivery; the old one no longer verifies', async () => {
    workers.start();
    const { site, secret: old, path: p } = await siteWithAddress('rotate', 'message.created');
    const { secret } = await webhooks(h).rotateSecret(site.id);
    expect(secret).toMatch(/^whsec_[0-9A-Za-z]{43}$/);
    expect(secret).not.toBe(old);
    await h.visitorSay(site.id, 'v', 'hi');
    await waitFor('a delivery', () => receiver.at(p).length >= 1);
    const [r] = receiver.at(p);
    expect(signatureValid(secret, r.headers, r.body)).toBe(true);
    expect(signatureValid(old, r.headers, r.body)).toBe(false);
  });

  test('secrets never appear in the logs, the delivery log or in clear in the database', async () => {
    const captured = captureLogger();
    workers.start({}, { logger: captured.logger });
    const { site, secret, path: p } = await siteWithAddress('quiet', 'message.created');
    let n = 0;
    receiver.on(p, (req, res, body) => answer(++n === 1 ? 500 : 200, 'echo ' + String(req.headers['x-service-signature']))(req, res, body));
    await h.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    expect(await finished(id)).toMatchObject({ status: 'delivered', attempts: 2 });

    const logText = captured.text();
    expect(logText).toContain(id); // the worker did log the attempts...
    expect(logText).not.toContain(secret); // ...but never the secret
    expect(logText).not.toContain(secret.slice('whsec_'.length));
    const row = await h.runtime.db('webhook_endpoints').where({ site_id: site.id }).first();
    expect(row.secret_encrypted).not.toContain(secret.slice('whsec_'.length));
    expect(row.secret_encrypted).toMatch(/^v1\./);
    const dump = JSON.stringify(await h.runtime.db('delivery_attempts').where({ site_id: site.id }));
    expect(dump).not.toContain(secret.slice('whsec_'.length));
    const listed = JSON.stringify(await webhooks(h).deliveries(site.id));
    expect(listed).not.toContain(secret.slice('whsec_'.length));
  });
});
