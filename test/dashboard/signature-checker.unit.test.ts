/**
 * The dashboard's signature checker (server/dashboard/browser/events/signature.ts) against the
 * service's own signing (server/webhooks/worker.ts `signedHeaders`) and the SDK's verifier: every
 * reason it gives is produced from a delivery the server signed, and its verdict agrees with the
 * SDK's on every case.
 */
import { randomBytes } from 'node:crypto';
import { signedHeaders } from '../../server/webhooks/worker';
import { checkSignature, parseHeaders, TOLERANCE_SECONDS, type CheckInput } from '../../server/dashboard/browser/events/signature';
import { verifySignedDelivery } from '../../sdk/src/webhooks';

const secret = () => `whsec_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'x')}`;
const OLD = secret();
const NEW = secret();
const ID = 'message.created:01m8b1wze5y4bmkdsspecyc1gp';
// Non-ASCII content: the HMAC is over UTF-8 bytes on both sides.
const BODY = JSON.stringify({
  id: ID,
  event: 'message.created',
  createdAt: '2026-11-26T06:00:00.000Z',
  workspaceKey: 'ws_01m8b0a7dx1sfc8d00mvh5mkrs',
  data: { conversation: { id: 'conv_01m8b1wze5y4bmkdsspecyc1gq' }, message: { content: 'Grüße aus Köln 👋 "quoted" \\ slash/' } },
});
const NOW_MS = Date.parse('2026-11-26T07:00:00.000Z');
const NOW = Math.floor(NOW_MS / 1000);

/** A delivery as the service signs it, and the checker's input for it. */
function delivery(signWith: string, body = BODY, atMs = NOW_MS) {
  const headers = signedHeaders(signWith, 'message.created', ID, 1, body, atMs);
  const input: CheckInput = {
    body,
    signature: headers['X-Service-Signature'],
    timestamp: headers['X-Service-Timestamp'],
    deliveryId: headers['X-Service-Delivery'],
    event: headers['X-Service-Event'],
    secrets: [signWith],
    now: NOW,
  };
  return { headers, input };
}

/** What the SDK says about the same input: null when it accepts, else its reason. */
async function sdk(input: CheckInput): Promise<string | null> {
  const headers: Record<string, string> = {};
  if (input.signature !== null) headers['x-service-signature'] = input.signature;
  if (input.timestamp !== null) headers['x-service-timestamp'] = input.timestamp;
  if (input.deliveryId !== null) headers['x-service-delivery'] = input.deliveryId;
  if (input.event) headers['x-service-event'] = input.event;
  try {
    await verifySignedDelivery({ rawBody: input.body, headers, secrets: input.secrets, currentTime: input.now });
    return null;
  } catch (err) {
    return (err as { reason: string }).reason;
  }
}

async function check(input: CheckInput) {
  const result = await checkSignature(input);
  // The checker's verdict is the SDK's, case by case.
  expect(result.ok).toBe((await sdk(input)) === null);
  return { ...result, reasons: result.findings.map((f) => f.reason), text: result.findings.map((f) => `${f.title} ${f.detail}`).join('\n') };
}

test('a delivery the service signed is valid with its secret, byte for byte (UTF-8 body)', async () => {
  const { input } = delivery(OLD);
  const r = await check(input);
  expect(r.ok).toBe(true);
  expect(r.matched).toBe(0);
  expect(r.reasons).toEqual(['valid']);
});

test('old secret: signed with the first of two pasted secrets; new secret: with the last', async () => {
  const old = await check({ ...delivery(OLD).input, secrets: [OLD, NEW] });
  expect(old.ok).toBe(true);
  expect(old.matched).toBe(0);
  expect(old.reasons).toEqual(['valid', 'old_secret']);
  expect(old.text).toMatch(/old secret \(secret 1 of 2\)/);
  // A receiver that checks with the new one only refuses it: that is what the note explains.
  expect(await sdk({ ...delivery(OLD).input, secrets: [NEW] })).toBe('signature_mismatch');

  const newer = await check({ ...delivery(NEW).input, secrets: [OLD, NEW] });
  expect(newer.matched).toBe(1);
  expect(newer.reasons).toEqual(['valid', 'new_secret']);
});

test('clock skew both ways beyond 300 s, and exactly 300 s accepted as the SDK does', async () => {
  const past = await check({ ...delivery(OLD).input, now: NOW + TOLERANCE_SECONDS + 1 });
  expect(past.ok).toBe(false);
  expect(past.reasons).toEqual(['clock_skew']);
  expect(past.text).toMatch(/Clock skew: signed 301 s before/);
  expect(await sdk({ ...delivery(OLD).input, now: NOW + 301 })).toBe('timestamp_too_old');

  const future = await check({ ...delivery(OLD).input, now: NOW - TOLERANCE_SECONDS - 1 });
  expect(future.reasons).toEqual(['clock_skew']);
  expect(future.text).toMatch(/signed 301 s after/);
  expect(await sdk({ ...delivery(OLD).input, now: NOW - 301 })).toBe('timestamp_in_future');

  expect((await check({ ...delivery(OLD).input, now: NOW + TOLERANCE_SECONDS })).ok).toBe(true);
  expect((await check({ ...delivery(OLD).input, now: NOW - TOLERANCE_SECONDS })).ok).toBe(true);
});

test('body changed: a trailing newline and a re-serialised body are named; another change or another secret gets the general hint', async () => {
  const { input } = delivery(OLD);
  const newline = await check({ ...input, body: `${BODY}\n` });
  expect(newline.reasons).toEqual(['body_changed']);
  expect(newline.text).toMatch(/Body changed/);
  expect(newline.text).toMatch(/trailing newline/);

  const pretty = await check({ ...input, body: JSON.stringify(JSON.parse(BODY), null, 2) });
  expect(pretty.reasons).toEqual(['body_changed']);
  expect(pretty.text).toMatch(/re-serialised/);

  const edited = await check({ ...input, body: BODY.replace('Köln', 'Bonn') });
  expect(edited.reasons).toEqual(['body_changed']);
  expect(edited.text).toMatch(/re-serialised, a trailing newline/);

  const otherSecret = await check({ ...input, secrets: [NEW] });
  expect(otherSecret.reasons).toEqual(['body_changed']);
  expect(otherSecret.matched).toBeNull();
  expect(await sdk({ ...input, secrets: [NEW] })).toBe('signature_mismatch');
});

test('the delivery header names another delivery than the signed body', async () => {
  const { input } = delivery(OLD);
  const r = await check({ ...input, deliveryId: 'message.created:01m8b1wze5y4bmkdsspecyc1gz' });
  expect(r.reasons).toEqual(['id_mismatch']);
  expect(await sdk({ ...input, deliveryId: 'message.created:01m8b1wze5y4bmkdsspecyc1gz' })).toBe('delivery_id_mismatch');
  const event = await check({ ...input, event: 'conversation.closed' });
  expect(event.reasons).toEqual(['event_mismatch']);
});

test('the sha256= prefix missing, an uppercase digest, a missing header, a bad timestamp, no secret', async () => {
  const { input } = delivery(OLD);
  const bare = input.signature!.slice('sha256='.length);
  const noPrefix = await check({ ...input, signature: bare });
  expect(noPrefix.reasons).toEqual(['missing_prefix']); // the digest itself is right: nothing else reported
  expect(await sdk({ ...input, signature: bare })).toBe('malformed_signature');

  expect((await check({ ...input, signature: `sha256=${bare.toUpperCase()}` })).reasons).toEqual(['malformed_signature']);
  expect((await check({ ...input, signature: 'v1,abc' })).reasons).toEqual(['malformed_signature']);
  expect((await check({ ...input, timestamp: null })).reasons).toEqual(['missing_header']);
  expect((await check({ ...input, timestamp: '2026-11-26T07:00:00Z' })).reasons).toEqual(['malformed_timestamp']);
  const noSecret = await checkSignature({ ...input, secrets: ['  ', ''] });
  expect(noSecret.ok).toBe(false);
  expect(noSecret.findings.map((f) => f.reason)).toEqual(['no_secret']);
});

test('several problems at once are all listed', async () => {
  const { input } = delivery(OLD);
  const r = await check({ ...input, body: `${BODY}\n`, now: NOW + 4000, deliveryId: 'message.created:01m8b1wze5y4bmkdsspecyc1gz' });
  expect(r.reasons).toEqual(['body_changed', 'clock_skew', 'id_mismatch']);
});

test('headers pasted as an HTTP dump, as curl -v prints them, or as the log’s JSON', () => {
  const { headers } = delivery(OLD);
  const dump = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  const want = { 'x-service-signature': headers['X-Service-Signature'], 'x-service-timestamp': headers['X-Service-Timestamp'] };
  expect(parseHeaders(`POST /hooks HTTP/1.1\r\n${dump}\r\n`)).toMatchObject(want);
  expect(parseHeaders(dump.replace(/^/gm, '> '))).toMatchObject(want);
  expect(parseHeaders(JSON.stringify(headers, null, 2))).toMatchObject({ ...want, 'x-service-delivery': ID });
});
