import { WebhookVerificationError } from './errors.js';
import { fromHex, hmacSha256, timingSafeEqual, toHex, utf8 } from './crypto.js';
import type { WebhookEvent } from './types.js';

/** Request headers as Fetch `Headers`, or a plain object (Node.js `req.headers`, any key case). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined | null>;

/** The exact bytes of the request body, before any JSON parsing. */
export type RawBody = string | Uint8Array | ArrayBuffer;

/**
 * Where a delivery id stands in a `WebhookReplayStore`:
 * - `processing`: a handler verified it and its listener is running (or its process died while it
 *   ran: the entry then expires after the short processing time to live and the retry runs it);
 * - `done`: the listener finished; a retry or a replay is a duplicate until the entry expires.
 */
export type WebhookDeliveryState = 'processing' | 'done';

/** What `WebhookReplayStore.begin` found: `started` means this call recorded the id as `processing`. */
export type WebhookBeginResult = 'started' | WebhookDeliveryState;

/**
 * Remembers delivery ids in two states, so that a retry of a delivery whose listener is still
 * running (or crashed) is not mistaken for a retry of one that was processed. Share one store
 * between every process that receives events (Redis, your database); each method maps to one
 * atomic command:
 *
 * ```ts
 * const redisStore: WebhookReplayStore = {   // ioredis
 *   async begin(id, ttl) {
 *     if ((await redis.set(`chat-webhook:${id}`, 'processing', 'PX', Math.ceil(ttl * 1000), 'NX')) === 'OK') return 'started';
 *     return (await redis.get(`chat-webhook:${id}`)) === 'done' ? 'done' : 'processing';
 *   },
 *   complete: async (id, ttl) => void (await redis.set(`chat-webhook:${id}`, 'done', 'PX', Math.ceil(ttl * 1000))),
 *   release: async (id) => void (await redis.del(`chat-webhook:${id}`)),
 * };
 * ```
 */
export interface WebhookReplayStore {
  /**
   * Atomically: when `id` has no unexpired entry, records it as `processing` for `ttlSeconds` and
   * returns `started` (Redis `SET key processing PX ms NX`, an INSERT on a unique key); otherwise
   * returns the entry's state. When the state cannot be read (the entry vanished between the two
   * commands), return `processing`: the handler then answers 503 and the service tries again.
   */
  begin(id: string, ttlSeconds: number): WebhookBeginResult | Promise<WebhookBeginResult>;
  /** Records `id` as `done` for `ttlSeconds`, replacing its `processing` entry (Redis `SET key done PX ms`). */
  complete(id: string, ttlSeconds: number): void | Promise<void>;
  /** Forgets `id`, so the next retry of the delivery runs the listener (Redis `DEL key`). Called when the listener failed. */
  release(id: string): void | Promise<void>;
}

/**
 * @deprecated The store interface of SDK 0.1.0: one state, taken at verification. Still accepted by
 * `seen`, with its old behaviour: a delivery whose listener is running in another process, or
 * whose process died mid-listener, is answered `200 duplicate` and its event is lost. Implement
 * `WebhookReplayStore` (`begin`, `complete`, `release`) instead.
 */
export interface ClaimOnlyReplayStore {
  /** Records `id` unless it is already recorded and unexpired, atomically. True when this call recorded it. */
  claim(id: string, ttlSeconds: number): boolean | Promise<boolean>;
  /** Forgets `id`. */
  release?(id: string): void | Promise<void>;
}

/** Default time to live of a `processing` entry: how long a retry waits for a running (or crashed) listener. */
const DEFAULT_PROCESSING_TTL_SECONDS = 10;
/** Default time to live of a `done` entry. */
const DEFAULT_DONE_TTL_SECONDS = 86_400;
const DEFAULT_TOLERANCE_SECONDS = 300;

interface MemoryEntry {
  state: WebhookDeliveryState;
  expires: number;
}

/**
 * The in-memory replay store: entries expire after their time to live, and the oldest are dropped
 * beyond `maxEntries`. Per process: with several processes behind a load balancer, use a shared
 * store (see `WebhookReplayStore`).
 */
export class MemoryReplayStore implements WebhookReplayStore {
  private readonly entries = new Map<string, MemoryEntry>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: { maxEntries?: number; now?: () => number } = {}) {
    this.maxEntries = options.maxEntries ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  begin(id: string, ttlSeconds: number): WebhookBeginResult {
    const now = this.now();
    this.sweep(now);
    const entry = this.entries.get(id);
    if (entry && entry.expires > now) return entry.state;
    this.put(id, { state: 'processing', expires: now + ttlSeconds * 1000 });
    return 'started';
  }

  complete(id: string, ttlSeconds: number): void {
    this.put(id, { state: 'done', expires: this.now() + ttlSeconds * 1000 });
  }

  release(id: string): void {
    this.entries.delete(id);
  }

  /**
   * @deprecated The one-state API of SDK 0.1.0: records `id` as `done` unless it has an unexpired
   * entry; true when this call recorded it.
   */
  claim(id: string, ttlSeconds: number): boolean {
    if (this.state(id) !== null) return false;
    this.complete(id, ttlSeconds);
    return true;
  }

  /** The unexpired state of `id`, or null. */
  state(id: string): WebhookDeliveryState | null {
    const entry = this.entries.get(id);
    return entry && entry.expires > this.now() ? entry.state : null;
  }

  has(id: string): boolean {
    return this.state(id) !== null;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Re-inserts, so the map's order stays the order of last writes (the sweep and eviction rely on it). */
  private put(id: string, entry: MemoryEntry): void {
    this.entries.delete(id);
    this.entries.set(id, entry);
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Drops expired ids from the oldest end, a few at a time. */
  private sweep(now: number): void {
    let budget = 100;
    for (const [id, entry] of this.entries) {
      if (entry.expires > now || budget-- <= 0) break;
      this.entries.delete(id);
    }
  }
}

/** The store `verifyWebhook` and the handlers use when given none: one per process (per copy of the SDK). */
export const defaultReplayStore: MemoryReplayStore = /* @__PURE__ */ new MemoryReplayStore();

/**
 * Delivery ids whose listener runs in this process, for `ClaimOnlyReplayStore`s only: they cannot
 * tell `processing` from `done`, so a retry of a delivery still running here is at least answered
 * 503 instead of `duplicate`.
 */
const runningHere = new Set<string>();

function isTwoStateStore(store: WebhookReplayStore | ClaimOnlyReplayStore): store is WebhookReplayStore {
  return typeof (store as WebhookReplayStore).begin === 'function';
}

/** The parts of the options the replay steps need. */
export type ReplaySettings = Pick<WebhookSecrets, 'seen' | 'replayTtlSeconds' | 'processingTtlSeconds' | 'toleranceSeconds'>;

function positiveSeconds(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new TypeError(`${name} must be a positive number of seconds.`);
  return value;
}

/** How long each state lives. `done` covers at least a captured delivery's whole validity (tolerance both ways). */
export function replayTtls(settings: ReplaySettings): { processing: number; done: number } {
  const tolerance = positiveSeconds(settings.toleranceSeconds, DEFAULT_TOLERANCE_SECONDS, 'toleranceSeconds');
  return {
    processing: positiveSeconds(settings.processingTtlSeconds, DEFAULT_PROCESSING_TTL_SECONDS, 'processingTtlSeconds'),
    done: Math.max(positiveSeconds(settings.replayTtlSeconds, DEFAULT_DONE_TTL_SECONDS, 'replayTtlSeconds'), 2 * tolerance),
  };
}

/** The replay store the settings select, or null when the check is off. */
export function replayStoreOf(settings: ReplaySettings): WebhookReplayStore | ClaimOnlyReplayStore | null {
  return settings.seen === false ? null : (settings.seen ?? defaultReplayStore);
}

/** Step 1 of processing a verified delivery: `started` means the caller runs the listener, then `completeDelivery` or `releaseDelivery`. */
export async function beginDelivery(
  store: WebhookReplayStore | ClaimOnlyReplayStore,
  id: string,
  settings: ReplaySettings,
  { runsHere = false }: { runsHere?: boolean } = {},
): Promise<WebhookBeginResult> {
  const ttl = replayTtls(settings);
  if (isTwoStateStore(store)) {
    const result = await store.begin(id, ttl.processing);
    if (result !== 'started' && result !== 'processing' && result !== 'done') {
      throw new TypeError(`WebhookReplayStore.begin must return 'started', 'processing' or 'done', not ${JSON.stringify(result)}.`);
    }
    return result;
  }
  if (await store.claim(id, ttl.done)) {
    if (runsHere) runningHere.add(id);
    return 'started';
  }
  return runningHere.has(id) ? 'processing' : 'done';
}

/** The listener succeeded: later retries and replays of `id` are duplicates. */
export async function completeDelivery(store: WebhookReplayStore | ClaimOnlyReplayStore, id: string, settings: ReplaySettings): Promise<void> {
  if (isTwoStateStore(store)) await store.complete(id, replayTtls(settings).done);
  else runningHere.delete(id); // the claim already reads as taken
}

/** The listener failed: the next retry of `id` runs it again. */
export async function releaseDelivery(store: WebhookReplayStore | ClaimOnlyReplayStore, id: string): Promise<void> {
  runningHere.delete(id);
  await store.release?.(id);
}

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
   * Where delivery ids are remembered (`processing`, then `done`): default an in-memory store per
   * process; pass a shared store with several processes, or `false` to skip this check (only if
   * you dedupe the event ids yourself: a retry repeats the id). A `ClaimOnlyReplayStore` (SDK 0.1.0)
   * still works, with its old single state.
   */
  seen?: WebhookReplayStore | ClaimOnlyReplayStore | false;
  /**
   * How long a `done` id is remembered: retries and redeliveries within it are duplicates.
   * Default 86 400 s (a day); never less than twice `toleranceSeconds` (a captured delivery stays
   * valid that long), a smaller value is raised to it.
   */
  replayTtlSeconds?: number;
  /**
   * How long a `processing` id holds off retries (answered 503) before a retry may run the
   * listener again, in case the process running it died. Default 10 s: short enough that a crash
   * mid-listener is still retried within the service's default schedule (attempts 5 s and 10 s
   * apart), and a retry of a slow but living listener only comes after the service's own 20 s
   * time-out, when the entry has expired anyway (delivery is at least once).
   */
  processingTtlSeconds?: number;
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
  /**
   * When to record the delivery id as `done`. `'verified'` (default): at once, as SDK 0.1.0 did;
   * if your processing then fails, call `seen.release(event.id)` before answering 5xx. `'later'`:
   * the id stays `processing` (`processingTtlSeconds`); call `seen.complete(event.id, ttlSeconds)`
   * when your processing succeeded, or `seen.release(event.id)` when it failed. Only `'later'`
   * survives a crash mid-processing: the `processing` entry expires and the service's retry runs.
   */
  markDone?: 'verified' | 'later';
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
 * 5. the delivery id is not `done` (`replayed`) nor `processing` elsewhere (`in_progress`: answer
 *    503 so that the service retries later); it is recorded as `processing`, then at once as
 *    `done` unless `markDone: 'later'`. If your processing then fails and you answer 5xx so
 *    that the service retries, call `seen.release(event.id)` first. The SDK's handlers do all of
 *    this for you, with `done` recorded only after your listener succeeded.
 */
export async function verifyWebhook(options: VerifyWebhookOptions): Promise<WebhookEvent> {
  const event = await verifySignedDelivery(options);
  const store = replayStoreOf(options);
  if (!store) return event;
  const state = await beginDelivery(store, event.id, options);
  if (state === 'done') {
    throw new WebhookVerificationError('replayed', `Delivery ${event.id} was already processed; a retry or redelivery of it is dropped.`, event.id);
  }
  if (state === 'processing') {
    throw new WebhookVerificationError(
      'in_progress',
      `Delivery ${event.id} is being processed (or its processing stopped less than processingTtlSeconds ago); answer 503 so that the service retries later.`,
      event.id,
    );
  }
  if ((options.markDone ?? 'verified') === 'verified') await completeDelivery(store, event.id, options);
  return event;
}

/** Checks 1 to 4 of `verifyWebhook`: everything but the replay store. */
export async function verifySignedDelivery(options: Omit<VerifyWebhookOptions, 'seen' | 'markDone'>): Promise<WebhookEvent> {
  const secrets = secretsOf(options);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
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
  if (!TIMESTAMP.test(timestamp))
    throw new WebhookVerificationError('malformed_timestamp', 'X-Service-Timestamp must be Unix time in whole seconds.', deliveryId);

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
  if (age > tolerance)
    throw new WebhookVerificationError('timestamp_too_old', `The delivery was signed ${age} s ago, more than the ${tolerance} s tolerance.`, deliveryId);
  if (-age > tolerance)
    throw new WebhookVerificationError(
      'timestamp_in_future',
      `The delivery is signed ${-age} s in the future, more than the ${tolerance} s tolerance: check your clock.`,
      deliveryId,
    );

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
    throw new WebhookVerificationError(
      'delivery_id_mismatch',
      `X-Service-Delivery (${deliveryId}) differs from the signed body's id (${event.id}).`,
      deliveryId,
    );
  }
  if (!event.id.startsWith(`${event.event}:`) || (eventHeader !== null && eventHeader.trim() !== event.event)) {
    throw new WebhookVerificationError(
      'event_mismatch',
      `X-Service-Event (${eventHeader}) or the id does not match the signed body's event (${event.event}).`,
      deliveryId,
    );
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
