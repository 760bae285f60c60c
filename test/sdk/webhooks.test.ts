/**
 * verifyWebhook on real event payloads (the outbox bodies the sender POSTs byte for byte), signed
 * by signTestWebhook and, independently, by the server's own signing function: good, tampered,
 * expired, future, replayed, mismatched id, two secrets, and every malformed header.
 */
import { createHmac } from 'node:crypto';
import { createHarness, Harness } from '../helpers/harness';
import { outboxEvents } from './helpers';
import {
  MemoryReplayStore,
  WebhookEvent,
  WebhookVerificationError,
  WebhookVerificationReason,
  computeWebhookSignature,
  signTestWebhook,
  verifyWebhook,
} from '../../sdk/src';
import { signedHeaders } from '../../server/webhooks/worker';

const SECRET = 'whsec_' + 'A1b2C3d4'.repeat(6);
const OLD_SECRET = 'whsec_' + 'Z9y8X7w6'.repeat(6);

let h: Harness;
let bodies: Record<'conversation.started' | 'message.created' | 'conversation.closed', string>;

beforeAll(async () => {
  h = await createHarness({ env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
  const { conversation } = await h.visitorSay(h.site.id, 'v-hooks', 'Hello, is anyone there?');
  await h.runtime.services.conversations.close(h.site.id, conversation.id);
  const events = await outboxEvents(h, h.site.id);
  const byName = (name: string) => events.find((e) => e.name === name)!.body;
  bodies = {
    'conversation.started': byName('conversation.started'),
    'message.created': byName('message.created'),
    'conversation.closed': byName('conversation.closed'),
  };
});
afterAll(async () => {
  await h?.close();
});

async function rejection(p: Promise<unknown>): Promise<WebhookVerificationError> {
  const err = await p.then(
    () => {
      throw new Error('expected verification to fail');
    },
    (e) => e,
  );
  expect(err).toBeInstanceOf(WebhookVerificationError);
  return err;
}

async function expectReason(p: Promise<unknown>, reason: WebhookVerificationReason) {
  const err = await rejection(p);
  expect(err.reason).toBe(reason);
  return err;
}

describe('good deliveries', () => {
  test('each of the three real events verifies and comes back typed (discriminated on `event`)', async () => {
    const seen = new MemoryReplayStore();
    for (const body of Object.values(bodies)) {
      const { rawBody, headers } = await signTestWebhook({ payload: body, secret: SECRET });
      expect(rawBody).toBe(body);
      const event: WebhookEvent = await verifyWebhook({ rawBody, headers, secret: SECRET, seen });
      expect(event).toEqual(JSON.parse(body));
      switch (event.event) {
        case 'message.created':
          expect(event.data.message.content).toBe('Hello, is anyone there?');
          break;
        case 'conversation.started':
          expect(event.data.message.id).toMatch(/^msg_/);
          break;
        case 'conversation.closed':
          expect(event.data.message).toBeNull();
          expect(event.data.conversation.state).toBe('closed');
          break;
        default: {
          const exhaustive: never = event;
          throw new Error(`unexpected ${exhaustive}`);
        }
      }
    }
  });

  test("what the server's own signer produces verifies (same algorithm as the real sender)", async () => {
    const body = bodies['message.created'];
    const { id, event } = JSON.parse(body);
    const headers = signedHeaders(SECRET, event, id, 2, body, Date.now());
    const verified = await verifyWebhook({ rawBody: Buffer.from(body), headers, secret: SECRET, seen: false });
    expect(verified.id).toBe(id);
    // And signTestWebhook produces the very same signature as the server for the same timestamp.
    const mine = await signTestWebhook({ payload: body, secret: SECRET, timestamp: Number(headers['X-Service-Timestamp']), attempt: 2 });
    expect(mine.headers).toEqual(Object.fromEntries(Object.entries(headers).filter(([k]) => k !== 'User-Agent')));
  });

  test('the signature is HMAC-SHA256(secret, timestamp + "." + rawBody), lowercase hex, sha256= prefix', async () => {
    const body = bodies['conversation.started'];
    const expected = 'sha256=' + createHmac('sha256', SECRET).update(`1700000000.${body}`).digest('hex');
    expect(await computeWebhookSignature(SECRET, 1700000000, body)).toBe(expected);
    expect(await computeWebhookSignature(SECRET, '1700000000', new TextEncoder().encode(body))).toBe(expected);
  });

  test('headers may be a Fetch Headers object, a Node.js headers object, or any letter case', async () => {
    const body = bodies['message.created'];
    const signed = await signTestWebhook({ payload: body, secret: SECRET });
    await expect(verifyWebhook({ rawBody: body, headers: new Headers(signed.headers), secret: SECRET, seen: false })).resolves.toMatchObject({
      event: 'message.created',
    });
    const lower = Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k.toLowerCase(), v]));
    await expect(verifyWebhook({ rawBody: body, headers: lower, secret: SECRET, seen: false })).resolves.toBeTruthy();
    const upper = Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k.toUpperCase(), [v]]));
    await expect(
      verifyWebhook({ rawBody: new TextEncoder().encode(body).buffer as ArrayBuffer, headers: upper, secret: SECRET, seen: false }),
    ).resolves.toBeTruthy();
  });
});

describe('refused deliveries, each with the check that failed', () => {
  test('tampered body, tampered timestamp, wrong secret: signature_mismatch', async () => {
    const body = bodies['message.created'];
    const { rawBody, headers } = await signTestWebhook({ payload: body, secret: SECRET });
    await expectReason(verifyWebhook({ rawBody: rawBody.replace('Hello', 'Hullo'), headers, secret: SECRET, seen: false }), 'signature_mismatch');
    // Whitespace matters: a parsed and re-serialised body is not the signed body.
    await expectReason(verifyWebhook({ rawBody: JSON.stringify(JSON.parse(rawBody), null, 1), headers, secret: SECRET, seen: false }), 'signature_mismatch');
    const moved = { ...headers, 'X-Service-Timestamp': String(Number(headers['X-Service-Timestamp']) - 1) };
    await expectReason(verifyWebhook({ rawBody, headers: moved, secret: SECRET, seen: false }), 'signature_mismatch');
    await expectReason(verifyWebhook({ rawBody, headers, secret: OLD_SECRET, seen: false }), 'signature_mismatch');
    const flipped = headers['X-Service-Signature'].replace(/.$/, (c) => (c === '0' ? '1' : '0'));
    await expectReason(verifyWebhook({ rawBody, headers: { ...headers, 'X-Service-Signature': flipped }, secret: SECRET, seen: false }), 'signature_mismatch');
  });

  test('expired: older than the tolerance (300 s by default); exactly at the tolerance passes', async () => {
    const body = bodies['message.created'];
    const now = Math.floor(Date.now() / 1000);
    const old = await signTestWebhook({ payload: body, secret: SECRET, timestamp: now - 301 });
    const err = await expectReason(verifyWebhook({ ...old, secret: SECRET, seen: false, currentTime: now }), 'timestamp_too_old');
    expect(err.message).toMatch(/301 s ago/);
    const edge = await signTestWebhook({ payload: body, secret: SECRET, timestamp: now - 300 });
    await expect(verifyWebhook({ ...edge, secret: SECRET, seen: false, currentTime: now })).resolves.toBeTruthy();
    const custom = await signTestWebhook({ payload: body, secret: SECRET, timestamp: now - 61 });
    await expectReason(verifyWebhook({ ...custom, secret: SECRET, seen: false, currentTime: now, toleranceSeconds: 60 }), 'timestamp_too_old');
  });

  test('future: further ahead than the tolerance (both directions are checked)', async () => {
    const body = bodies['message.created'];
    const now = Math.floor(Date.now() / 1000);
    const ahead = await signTestWebhook({ payload: body, secret: SECRET, timestamp: now + 301 });
    await expectReason(verifyWebhook({ ...ahead, secret: SECRET, seen: false, currentTime: now }), 'timestamp_in_future');
    const slightly = await signTestWebhook({ payload: body, secret: SECRET, timestamp: now + 299 });
    await expect(verifyWebhook({ ...slightly, secret: SECRET, seen: false, currentTime: now })).resolves.toBeTruthy();
  });

  test('replayed: a delivery id taken once is refused, also on a later attempt signed afresh', async () => {
    const seen = new MemoryReplayStore();
    const body = bodies['conversation.started'];
    const first = await signTestWebhook({ payload: body, secret: SECRET });
    const event = await verifyWebhook({ ...first, secret: SECRET, seen });
    expect(seen.has(event.id)).toBe(true);
    const err = await expectReason(verifyWebhook({ ...first, secret: SECRET, seen }), 'replayed');
    expect(err.deliveryId).toBe(event.id);
    const retry = await signTestWebhook({ payload: body, secret: SECRET, attempt: 2, timestamp: Math.floor(Date.now() / 1000) + 5 });
    await expectReason(verifyWebhook({ ...retry, secret: SECRET, seen }), 'replayed');
    // Released (processing failed): the retry is accepted.
    seen.release(event.id);
    await expect(verifyWebhook({ ...retry, secret: SECRET, seen })).resolves.toMatchObject({ id: event.id });
  });

  test('the default store (no `seen` given) remembers ids process-wide', async () => {
    const { rawBody, headers } = await signTestWebhook({ payload: bodies['conversation.closed'], secret: SECRET });
    await verifyWebhook({ rawBody, headers, secret: SECRET });
    await expectReason(verifyWebhook({ rawBody, headers, secret: SECRET }), 'replayed');
  });

  test('a failed check does not take the id: a genuine delivery after a forged one is accepted', async () => {
    const seen = new MemoryReplayStore();
    const body = bodies['message.created'];
    const forged = await signTestWebhook({ payload: body, secret: 'whsec_attacker' });
    await expectReason(verifyWebhook({ ...forged, secret: SECRET, seen }), 'signature_mismatch');
    const genuine = await signTestWebhook({ payload: body, secret: SECRET });
    await expect(verifyWebhook({ ...genuine, secret: SECRET, seen })).resolves.toBeTruthy();
  });

  test('mismatched id: X-Service-Delivery differs from the signed body id (the header is not signed)', async () => {
    const started = JSON.parse(bodies['conversation.started']);
    const { rawBody, headers } = await signTestWebhook({ payload: bodies['message.created'], secret: SECRET, deliveryId: started.id });
    await expectReason(verifyWebhook({ rawBody, headers, secret: SECRET, seen: false }), 'delivery_id_mismatch');
    // A replay store keyed on the header alone could be dodged this way: the body id is what counts.
    const wrongEvent = await signTestWebhook({ payload: bodies['message.created'], secret: SECRET, event: 'conversation.closed' });
    await expectReason(verifyWebhook({ ...wrongEvent, secret: SECRET, seen: false }), 'event_mismatch');
  });

  test('missing and malformed headers', async () => {
    const body = bodies['message.created'];
    const { headers } = await signTestWebhook({ payload: body, secret: SECRET });
    for (const name of ['X-Service-Signature', 'X-Service-Timestamp', 'X-Service-Delivery']) {
      const without = { ...headers };
      delete without[name];
      const err = await expectReason(verifyWebhook({ rawBody: body, headers: without, secret: SECRET, seen: false }), 'missing_header');
      expect(err.message).toContain(name);
    }
    const hex = headers['X-Service-Signature'].slice('sha256='.length);
    for (const bad of [hex, `sha1=${hex}`, `sha256=${hex.toUpperCase()}`, `sha256=${hex.slice(2)}`, `sha256=${hex},sha256=${hex}`]) {
      await expectReason(
        verifyWebhook({ rawBody: body, headers: { ...headers, 'X-Service-Signature': bad }, secret: SECRET, seen: false }),
        'malformed_signature',
      );
    }
    for (const bad of ['1.5', '-1', 'yesterday', '']) {
      const reason = bad === '' ? 'missing_header' : 'malformed_timestamp';
      await expectReason(verifyWebhook({ rawBody: body, headers: { ...headers, 'X-Service-Timestamp': bad }, secret: SECRET, seen: false }), reason);
    }
  });

  test('a parsed object instead of the raw body is refused with a message that says what to do', async () => {
    const { headers } = await signTestWebhook({ payload: bodies['message.created'], secret: SECRET });
    const err = await expectReason(verifyWebhook({ rawBody: JSON.parse(bodies['message.created']), headers, secret: SECRET, seen: false }), 'invalid_body');
    expect(err.message).toMatch(/express\.raw/);
  });

  test('a correctly signed body that is not an event is refused', async () => {
    const { rawBody, headers } = await signTestWebhook({ payload: '{"hello":"world"}', secret: SECRET, deliveryId: 'x', event: 'message.created' });
    await expectReason(verifyWebhook({ rawBody, headers, secret: SECRET, seen: false }), 'invalid_body');
    const notJson = await signTestWebhook({ payload: 'not json', secret: SECRET, deliveryId: 'x', event: 'message.created' });
    await expectReason(verifyWebhook({ ...notJson, secret: SECRET, seen: false }), 'invalid_body');
  });

  test('no secret is a programming error (TypeError), not a refused delivery', async () => {
    const signed = await signTestWebhook({ payload: bodies['message.created'], secret: SECRET });
    await expect(verifyWebhook({ ...signed, seen: false })).rejects.toThrow(TypeError);
    await expect(verifyWebhook({ ...signed, secrets: [], seen: false })).rejects.toThrow(TypeError);
  });
});

describe('two secrets (rotation)', () => {
  test('a delivery signed with either secret verifies; with neither it does not', async () => {
    const body = bodies['message.created'];
    const oldSigned = await signTestWebhook({ payload: body, secret: OLD_SECRET });
    const newSigned = await signTestWebhook({ payload: body, secret: SECRET });
    await expect(verifyWebhook({ ...oldSigned, secrets: [SECRET, OLD_SECRET], seen: false })).resolves.toBeTruthy();
    await expect(verifyWebhook({ ...newSigned, secrets: [SECRET, OLD_SECRET], seen: false })).resolves.toBeTruthy();
    await expect(verifyWebhook({ ...newSigned, secret: SECRET, secrets: [OLD_SECRET], seen: false })).resolves.toBeTruthy();
    await expectReason(verifyWebhook({ ...oldSigned, secrets: [SECRET], seen: false }), 'signature_mismatch');
    await expectReason(verifyWebhook({ ...oldSigned, secrets: [SECRET, 'whsec_third'], seen: false }), 'signature_mismatch');
  });

  test('after a real rotation the new secret verifies what the server signs', async () => {
    const service = h.runtime.services.webhooks; // the harness allows private networks: the address is on localhost
    const first = await service.setEndpoint(h.site.id, 'https://localhost:9/hooks');
    const rotated = await service.rotateSecret(h.site.id);
    expect(first.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(first.secret);
    const body = bodies['conversation.closed'];
    const { id, event } = JSON.parse(body);
    const headers = signedHeaders(rotated.secret, event, id, 1, body, Date.now());
    await expect(verifyWebhook({ rawBody: body, headers, secrets: [rotated.secret, first.secret!], seen: false })).resolves.toBeTruthy();
    await expectReason(verifyWebhook({ rawBody: body, headers, secret: first.secret!, seen: false }), 'signature_mismatch');
  });
});

describe('MemoryReplayStore', () => {
  test('ids expire after their time to live, and the oldest go beyond maxEntries', () => {
    let now = 1_000_000;
    const store = new MemoryReplayStore({ maxEntries: 3, now: () => now });
    expect(store.claim('a', 10)).toBe(true);
    expect(store.claim('a', 10)).toBe(false);
    now += 10_001;
    expect(store.has('a')).toBe(false);
    expect(store.claim('a', 10)).toBe(true);
    store.claim('b', 10);
    store.claim('c', 10);
    store.claim('d', 10);
    expect(store.size).toBe(3);
    expect(store.has('a')).toBe(false);
    expect(store.has('d')).toBe(true);
  });
});
