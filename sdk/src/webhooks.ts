import { WebhookVerificationError } from './errors';
import { fromHex, hmacSha256, timingSafeEqual, toHex, utf8 } from './crypto';
import type { WebhookEvent } from './types';

/** Request headers as Fetch `Headers`, or a plain object (Node.js `req.headers`, any key case). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined | null>;

/** The exact bytes of the request body, before any JSON parsing. */
export type RawBody = string | Uint8Array | ArrayBuffer;

/**
 * Remembers the delivery ids already taken, so a retried or replayed delivery is dropped.
 * Implement it on Redis or your database when you run more than one process:
 *
 * ```ts
 * const redisStore: WebhookReplayStore = {
 *   claim: async (id, ttl) => (await redis.set(`webhook:${id}`, '1', 'EX', ttl, 'NX')) === 'OK',
 *   release: async (id) => void (await redis.del(`webhook:${id}`)),
 * };
 * ```
 */
export interface WebhookReplayStore {
  /**
   * Records `id` unless it is already recorded and unexpired, atomically (Redis `SET NX EX`, an
   * INSERT on a unique key). Returns true when this call recorded it, false for a repeat.
   */
  claim(id: string, ttlSeconds: number): boolean | Promise<boolean>;
  /** Forgets `id`, so a retry of the delivery is accepted. Call it when processing the event failed. */
  release?(id: string): void | Promise<void>;
}

/**
 * The in-memory replay store: ids expire after their time to live, and the oldest are dropped
 * beyond `maxEntries`. Per process: with several processes behind a load balancer, use a shared
 * store (see `WebhookReplayStore`).
 */
export class MemoryReplayStore implements WebhookReplayStore {
  private readonly entries = new Map<string, number>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: { maxEntries?: number; now?: () => number } = {}) {
    this.maxEntries = options.maxEntries ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  claim(id: string, ttlSeconds: number): boolean {
    const now = this.now();
    this.sweep(now);
    const expires = this.entries.get(id);
    if (expires !== undefined && expires > now) return false;
    this.entries.delete(id);
    this.entries.set(id, now + ttlSeconds * 1000);
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    return true;
  }

  release(id: string): void {
    this.entries.delete(id);
  }

  has(id: string): boolean {
    const expires = this.entries.get(id);
    return expires !== undefined && expires > this.now();
  }

  get size(): number {
    return this.entries.size;
  }

  /** Drops expired ids from the oldest end (insertion order), a few at a time. */
  private sweep(now: number): void {
    let budget = 100;
    for (const [id, expires] of this.entries) {
      if (expires > now || budget-- <= 0) break;
      this.entries.delete(id);
    }
  }
}

/** The store `verifyWebhook` uses when given none: one per process (per copy of the SDK). */
export const defaultReplayStore: MemoryReplayStore = /* @__PURE__ */ new MemoryReplayStore();

export interface WebhookSecrets {
  /** The signing secret (`whsec_...`) of your event address. */
  secret?: string;
  /**
   * Several secrets, any of which may have signed the delivery: during a rotation, list the new
   * secret and the old one until the deliveries signed with the old one are through.
   */
  secrets?: readonly string[];
  /** Largest difference between the delivery's timestamp and your clock, either way. Default 300 s. */
  toleranceSeconds?: number;
  /**
   * Where taken delivery ids are remembered: default an in-memory store per process; pass a
   * shared store with several processes, or `false` to skip this check (only if you dedupe the
   * event ids yourself: a retry repeats the id).
   */
  seen?: WebhookReplayStore | false;
  /** How long a taken id is remembered. Default 86 400 s (a day). */
  replayTtlSeconds?: number;
}

export interface VerifyWebhookOptions extends WebhookSecrets {
  /**
   * The exact raw bytes of the request body. Not `req.body` after `express.json()`: a parsed and
   * re-serialised body does not match the signature. Use `express.raw({ type: 'application/json' })`,
   * `await request.text()`, or the handlers of this SDK that read the body themselves.
   */
  rawBody: RawBody;
  /** The request headers. */
  headers: WebhookHeaders;
  /** Your clock, Unix seconds (for tests). Default now. */
  currentTime?: number;
}

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;
const TIMESTAMP = /^[0-9]{1,12}$/;

function header(headers: WebhookHeaders, name: string): string | null {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name);
  const record = headers as Record<string, string | string[] | undefined | null>;
  for (const key of Object.keys(record)) {
    if (key.toLowerCase() !== name) continue;
    const value = record[key];
    if (Array.isArray(value)) return value.join(', ');
    return value ?? null;
  }
  return null;
}

/** Bytes from any realm (a Buffer from another context fails `instanceof Uint8Array`). */
export function asBytes(value: unknown): Uint8Array | null {
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (Object.prototype.toString.call(value) === '[object ArrayBuffer]') return new Uint8Array(value as ArrayBuffer);
  return null;
}

function bodyBytes(rawBody: RawBody): Uint8Array {
  if (typeof rawBody === 'string') return utf8(rawBody);
  const bytes = asBytes(rawBody);
  if (bytes) return bytes;
  throw new WebhookVerificationError(
    'invalid_body',
    'rawBody must be the raw request body (string, Buffer, Uint8Array or ArrayBuffer), not a parsed object. ' +
      'A JSON body parser ran before verification: use express.raw({ type: "application/json" }) on this route, or the SDK\'s webhook handlers.',
  );
}

function secretsOf(options: WebhookSecrets): string[] {
  const list = [...(options.secrets ?? []), ...(options.secret !== undefined ? [options.secret] : [])];
  if (list.length === 0 || list.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError('verifyWebhook needs `secret` or `secrets`: the signing secret(s) of your event address (whsec_...).');
  }
  return list;
}

/** `sha256=<hex>` over `timestamp + "." + rawBody`. */
export async function computeWebhookSignature(secret: string, timestamp: string | number, rawBody: RawBody): Promise<string> {
  return `sha256=${toHex(await hmacSha256(secret, signedBytes(String(timestamp), bodyBytes(rawBody))))}`;
}

function signedBytes(timestamp: string, body: Uint8Array): Uint8Array {
  const prefix = utf8(`${timestamp}.`);
  const out = new Uint8Array(prefix.length + body.length);
  out.set(prefix, 0);
  out.set(body, prefix.length);
  return out;
}

/**
 * Verifies one event delivery and returns the event, typed by its `event` name. Async because it
 * uses Web Crypto (`crypto.subtle`), which runs on Node.js 18+ and on edge runtimes alike.
 *
 * Checks, in order (each failure is a `WebhookVerificationError` with its `reason`):
 * 1. the `X-Service-Signature`, `X-Service-Timestamp` and `X-Service-Delivery` headers are present
 *    and well-formed (`missing_header`, `malformed_signature`, `malformed_timestamp`);
 * 2. the signature is the HMAC-SHA256 of `timestamp.rawBody` under one of the secrets, compared in
 *    constant time (`signature_mismatch`);
 * 3. the timestamp is within `toleranceSeconds` of your clock, in both directions
 *    (`timestamp_too_old`, `timestamp_in_future`);
 * 4. the body is a JSON event whose `id` equals `X-Service-Delivery` and whose `event` equals
 *    `X-Service-Event` (`invalid_body`, `delivery_id_mismatch`, `event_mismatch`): the headers are
 *    not signed, the body is;
 * 5. the delivery id was not taken before (`replayed`); it is recorded as taken now. If your
 *    processing then fails and you answer 5xx so that the service retries, call
 *    `seen.release(event.id)` first (the SDK's handlers do this for you).
 */
export async function verifyWebhook(options: VerifyWebhookOptions): Promise<WebhookEvent> {
  const secrets = secretsOf(options);
  const tolerance = options.toleranceSeconds ?? 300;
  const body = bodyBytes(options.rawBody);
  const { headers } = options;

  const signatureHeader = header(headers, 'x-service-signature');
  const timestampHeader = header(headers, 'x-service-timestamp');
  const deliveryId = header(headers, 'x-service-delivery');
  const eventHeader = header(headers, 'x-service-event');
  for (const [name, value] of [
    ['X-Service-Signature', signatureHeader],
    ['X-Service-Timestamp', timestampHeader],
    ['X-Service-Delivery', deliveryId],
  ] as const) {
    if (value === null || value === '') throw new WebhookVerificationError('missing_header', `The ${name} header is missing.`, deliveryId);
  }
  const signatureMatch = SIGNATURE.exec(signatureHeader!.trim());
  if (!signatureMatch) {
    throw new WebhookVerificationError('malformed_signature', 'X-Service-Signature must be sha256= followed by 64 lowercase hex digits.', deliveryId);
  }
  const timestamp = timestampHeader!.trim();
  if (!TIMESTAMP.test(timestamp)) throw new WebhookVerificationError('malformed_timestamp', 'X-Service-Timestamp must be Unix time in whole seconds.', deliveryId);

  const given = fromHex(signatureMatch[1])!;
  const signed = signedBytes(timestamp, body);
  let valid = false;
  for (const secret of secrets) {
    // Every secret is tried (no early exit), so the time taken does not tell which one matched.
    if (timingSafeEqual(await hmacSha256(secret, signed), given)) valid = true;
  }
  if (!valid) {
    throw new WebhookVerificationError(
      'signature_mismatch',
      'The signature does not match: wrong signing secret, or the body or timestamp was changed (did something parse and re-serialise the body?).',
      deliveryId,
    );
  }

  const now = options.currentTime ?? Math.floor(Date.now() / 1000);
  const age = now - Number(timestamp);
  if (age > tolerance) throw new WebhookVerificationError('timestamp_too_old', `The delivery was signed ${age} s ago, more than the ${tolerance} s tolerance.`, deliveryId);
  if (-age > tolerance) throw new WebhookVerificationError('timestamp_in_future', `The delivery is signed ${-age} s in the future, more than the ${tolerance} s tolerance: check your clock.`, deliveryId);

  let event: WebhookEvent;
  try {
    event = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('invalid_body', 'The signed body is not valid UTF-8 JSON.', deliveryId);
  }
  if (!event || typeof event !== 'object' || typeof event.id !== 'string' || typeof event.event !== 'string' || !event.data || typeof event.data !== 'object') {
    throw new WebhookVerificationError('invalid_body', 'The signed body is not an event envelope {id, event, createdAt, workspaceKey, data}.', deliveryId);
  }
  if (event.id !== deliveryId!.trim()) {
    throw new WebhookVerificationError('delivery_id_mismatch', `X-Service-Delivery (${deliveryId}) differs from the signed body's id (${event.id}).`, deliveryId);
  }
  if (!event.id.startsWith(`${event.event}:`) || (eventHeader !== null && eventHeader.trim() !== event.event)) {
    throw new WebhookVerificationError('event_mismatch', `X-Service-Event (${eventHeader}) or the id does not match the signed body's event (${event.event}).`, deliveryId);
  }

  const store = options.seen === false ? null : (options.seen ?? defaultReplayStore);
  if (store && !(await store.claim(event.id, options.replayTtlSeconds ?? 86_400))) {
    throw new WebhookVerificationError('replayed', `Delivery ${event.id} was already taken; a retry or redelivery of it is dropped.`, deliveryId);
  }
  return event;
}

export interface SignTestWebhookOptions {
  /** The event to deliver: an object (serialised with JSON.stringify) or the exact body text. */
  payload: WebhookEvent | Record<string, unknown> | string;
  secret: string;
  /** Unix seconds; default now. */
  timestamp?: number;
  /** `X-Service-Attempt`; default 1. */
  attempt?: number;
  /** `X-Service-Delivery`; default the payload's `id`. */
  deliveryId?: string;
  /** `X-Service-Event`; default the payload's `event`. */
  event?: string;
}

export interface SignedTestWebhook {
  /** The body to send, byte for byte. */
  rawBody: string;
  /** `Content-Type` and the five `X-Service-*` headers, as the service sends them. */
  headers: Record<string, string>;
}

/**
 * Signs a delivery exactly as the service does, to test your handler:
 *
 * ```ts
 * const { rawBody, headers } = await signTestWebhook({ payload: event, secret: 'whsec_test' });
 * await fetch('https://localhost:3000/webhooks/chat', { method: 'POST', headers, body: rawBody });
 * ```
 */
export async function signTestWebhook(options: SignTestWebhookOptions): Promise<SignedTestWebhook> {
  const rawBody = typeof options.payload === 'string' ? options.payload : JSON.stringify(options.payload);
  let parsed: { id?: unknown; event?: unknown } = {};
  try {
    parsed = JSON.parse(rawBody);
  } catch {
    // a deliberately broken body: headers must then be given
  }
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const deliveryId = options.deliveryId ?? (typeof parsed.id === 'string' ? parsed.id : '');
  const event = options.event ?? (typeof parsed.event === 'string' ? parsed.event : '');
  return {
    rawBody,
    headers: {
      'Content-Type': 'application/json',
      'X-Service-Event': event,
      'X-Service-Delivery': deliveryId,
      'X-Service-Attempt': String(options.attempt ?? 1),
      'X-Service-Timestamp': timestamp,
      'X-Service-Signature': await computeWebhookSignature(options.secret, timestamp, rawBody),
    },
  };
}
