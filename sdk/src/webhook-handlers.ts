/**
 * Ready-made receivers for Express, Fastify, plain node:http and Fetch-style runtimes (Deno, Bun,
 * Cloudflare Workers, Next.js route handlers, Hono). Each one reads the RAW body itself, so no
 * JSON parser can spoil the signature, verifies it, calls your listener, and answers:
 *
 * | outcome | answer | the service then |
 * |---|---|---|
 * | listener returned | 200 `{"received":true}` (the id is recorded `done`) | is done |
 * | delivery id `done` (a retry of a processed event) | 200 `{"received":true,"duplicate":true}` | is done |
 * | delivery id `processing` (its listener runs here or in another process, or died less than `processingTtlSeconds` ago) | 503 with `Retry-After` | retries later |
 * | verification failed | 400 with the `reason` | does not retry (shows the answer in the delivery log) |
 * | listener threw | 500 (the id is released) | retries: the retry runs the listener |
 * | replay store unreachable | 503 with `Retry-After` | retries later |
 * | body over `maxBodyBytes` | 413 | does not retry |
 *
 * Why 503 and not 409 for `processing`: the service takes every 4xx as the receiver's final "no"
 * and gives up, and retries every 5xx; 503 "try again later" is what this answer means.
 */
import { WebhookVerificationError } from './errors.js';
import {
  asBytes,
  beginDelivery,
  completeDelivery,
  releaseDelivery,
  replayStoreOf,
  replayTtls,
  verifySignedDelivery,
  type RawBody,
  type WebhookBeginResult,
  type WebhookHeaders,
  type WebhookSecrets,
} from './webhooks.js';
import type { WebhookEvent } from './types.js';

export interface WebhookHandlerOptions extends WebhookSecrets {
  /** Largest body accepted. Default 1 MiB (an event is a few KiB). */
  maxBodyBytes?: number;
  /**
   * Told about each refused delivery (a `WebhookVerificationError`), each listener failure and
   * each replay store failure.
   * Default: one line on `console.error`. Pass `() => {}` to silence it.
   */
  onError?: (error: unknown, context: { deliveryId: string | null }) => void;
}

/** What a handler answers: status, JSON body, and extra headers (`Retry-After` on a 503). */
export interface WebhookOutcome {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

const DEFAULT_MAX_BODY = 1024 * 1024;

function defaultOnError(error: unknown, context: { deliveryId: string | null }): void {
  const what =
    error instanceof WebhookVerificationError
      ? `refused (${error.reason}): ${error.message}`
      : `failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
  console.error(`[chat-service-sdk] webhook delivery ${context.deliveryId ?? '(no id)'} ${what}`);
}

const json = (status: number, value: unknown, headers?: Record<string, string>): WebhookOutcome =>
  headers ? { status, body: JSON.stringify(value), headers } : { status, body: JSON.stringify(value) };

const tooLarge = (max: number): WebhookOutcome => json(413, { error: { code: 'payload_too_large', message: `The body is over ${max} bytes.` } });

/**
 * The core of every handler: verify `rawBody`, run `listener`, and decide the answer. Use it to
 * plug the SDK into a framework it has no helper for (send `outcome.headers` too).
 *
 * The delivery id goes `processing` when verification passes and `done` only once the listener
 * resolved, so a retry that arrives while the listener runs, in this process or another one
 * sharing the store, or after the process running it died, is never answered "duplicate" for an
 * event nobody finished.
 */
export async function processWebhook(
  rawBody: RawBody,
  headers: WebhookHeaders,
  options: WebhookHandlerOptions,
  listener: (event: WebhookEvent) => unknown,
): Promise<WebhookOutcome> {
  const onError = options.onError ?? defaultOnError;
  const store = replayStoreOf(options);
  const ttl = replayTtls(options);
  let event: WebhookEvent;
  try {
    event = await verifySignedDelivery({ ...options, rawBody, headers });
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err;
    onError(err, { deliveryId: err.deliveryId });
    return json(400, { error: { code: 'webhook_verification_failed', reason: err.reason, message: err.message } });
  }
  // Seconds after which the `processing` entry has expired at the latest.
  const retryAfter = { 'Retry-After': String(Math.ceil(ttl.processing)) };

  if (store) {
    let state: WebhookBeginResult;
    try {
      state = await beginDelivery(store, event.id, options, { runsHere: true });
    } catch (err) {
      onError(err, { deliveryId: event.id });
      return json(503, { error: { code: 'replay_store_unavailable', message: 'The replay store could not be reached; retry later.' } }, retryAfter);
    }
    if (state === 'done') return json(200, { received: true, duplicate: true });
    if (state === 'processing') {
      return json(503, { error: { code: 'in_progress', message: 'This delivery is still being processed; retry later.' } }, retryAfter);
    }
  }

  try {
    await listener(event);
  } catch (err) {
    onError(err, { deliveryId: event.id });
    if (store) {
      // Let the retry through: this delivery was not processed.
      try {
        await releaseDelivery(store, event.id);
      } catch (releaseErr) {
        // The `processing` entry then expires by itself; the retries until then are answered 503.
        onError(releaseErr, { deliveryId: event.id });
      }
    }
    return json(500, { error: { code: 'listener_failed', message: 'The event listener failed; the delivery will be retried.' } });
  }

  if (store) {
    try {
      await completeDelivery(store, event.id, options);
    } catch (err) {
      // The event was processed: answering 5xx would have it processed twice. The `processing`
      // entry holds off retries for its time to live; a later redelivery would run again.
      onError(err, { deliveryId: event.id });
    }
  }
  return json(200, { received: true });
}

// ---------------------------------------------------------------------------------------------
// Fetch-style runtimes

/** The body's bytes, or null as soon as they pass `max` (the rest is never read: the stream is cancelled). */
async function readLimited(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | null> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const bytes = asBytes(value) ?? new Uint8Array(0);
      size += bytes.byteLength;
      if (size > max) {
        await reader.cancel().catch(() => undefined);
        return null;
      }
      chunks.push(bytes);
    }
  } finally {
    reader.releaseLock();
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/**
 * For runtimes with Fetch `Request`/`Response`: Deno, Bun, Cloudflare Workers, Next.js route
 * handlers, Hono (`c.req.raw`).
 *
 * ```ts
 * export const POST = (request: Request) =>
 *   handleWebhookRequest(request, { secret: process.env.CHAT_WEBHOOK_SECRET! }, async (event) => { ... });
 * ```
 */
export async function handleWebhookRequest(request: Request, options: WebhookHandlerOptions, listener: (event: WebhookEvent) => unknown): Promise<Response> {
  const max = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  let outcome: WebhookOutcome;
  if (request.method !== 'POST') {
    outcome = json(405, { error: { code: 'method_not_allowed', message: 'Events are delivered with POST.' } }, { Allow: 'POST' });
  } else if (declared > max) {
    // Refused on the declared length: not a byte of the body is read.
    await request.body?.cancel().catch(() => undefined);
    outcome = tooLarge(max);
  } else {
    // Chunked bodies have no length: counted while read, and reading stops at the limit.
    const body = await readLimited(request.body, max);
    outcome = body === null ? tooLarge(max) : await processWebhook(body, request.headers, options, listener);
  }
  return new Response(outcome.body, { status: outcome.status, headers: { ...outcome.headers, 'Content-Type': 'application/json' } });
}

// ---------------------------------------------------------------------------------------------
// node:http and Express

/** The parts of Node's `IncomingMessage` (and Express's `Request`) the handlers use. */
export interface NodeRequestLike extends AsyncIterable<unknown> {
  method?: string;
  headers: Record<string, string | string[] | undefined>;
  /** Set by body parsers (Express). */
  body?: unknown;
  readableEnded?: boolean;
}

/** The parts of Node's `ServerResponse` (and Express's `Response`) the handlers use. */
export interface NodeResponseLike {
  statusCode: number;
  headersSent?: boolean;
  setHeader(name: string, value: string): unknown;
  end(chunk?: string): unknown;
}

class BodyTooLarge extends Error {}

const PARSED_BODY_MESSAGE =
  'The request body was already parsed (req.body is an object), so its raw bytes are gone and the signature cannot be checked. ' +
  'Mount the webhook handler BEFORE express.json(), or exclude its path from the JSON parser, or use express.raw({ type: "application/json" }) on this route.';

async function readNodeBody(req: NodeRequestLike, max: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const encoder = new TextEncoder();
  for await (const chunk of req) {
    const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : (asBytes(chunk) ?? new Uint8Array(0));
    size += bytes.byteLength;
    if (size > max) throw new BodyTooLarge();
    chunks.push(bytes);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.byteLength;
  }
  return out;
}

/** The raw body: from `express.raw()`/`express.text()` when they ran, else read from the stream. Throws when a JSON parser ate it. */
async function rawBodyOf(req: NodeRequestLike, max: number): Promise<Uint8Array | string> {
  const body = req.body;
  if (typeof body === 'string') return body;
  const bytes = asBytes(body);
  if (bytes) return bytes;
  const emptyObject = body !== null && typeof body === 'object' && Object.keys(body as object).length === 0;
  if (body === undefined || body === null || (emptyObject && !req.readableEnded)) {
    if (req.readableEnded) throw new Error(PARSED_BODY_MESSAGE.replace('(req.body is an object)', '(the stream was consumed)'));
    return readNodeBody(req, max);
  }
  throw new Error(PARSED_BODY_MESSAGE);
}

function send(res: NodeResponseLike, outcome: WebhookOutcome): void {
  if (res.headersSent) return;
  res.statusCode = outcome.status;
  for (const [name, value] of Object.entries(outcome.headers ?? {})) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json');
  res.end(outcome.body);
}

async function handleNode<Req extends NodeRequestLike, Res extends NodeResponseLike>(
  req: Req,
  res: Res,
  options: WebhookHandlerOptions,
  listener: (event: WebhookEvent, req: Req, res: Res) => unknown,
): Promise<void> {
  if (req.method !== undefined && req.method !== 'POST') {
    res.setHeader('Allow', 'POST');
    return send(res, json(405, { error: { code: 'method_not_allowed', message: 'Events are delivered with POST.' } }));
  }
  let raw: Uint8Array | string;
  try {
    raw = await rawBodyOf(req, options.maxBodyBytes ?? DEFAULT_MAX_BODY);
  } catch (err) {
    if (err instanceof BodyTooLarge) {
      return send(res, json(413, { error: { code: 'payload_too_large', message: 'The body is too large.' } }));
    }
    throw err;
  }
  send(res, await processWebhook(raw, req.headers, options, (event) => listener(event, req, res)));
}

/**
 * A `node:http` request listener.
 *
 * ```ts
 * https.createServer({ key, cert }, createNodeWebhookHandler({ secret }, async (event) => { ... })).listen(3000);
 * ```
 */
export function createNodeWebhookHandler<Req extends NodeRequestLike = NodeRequestLike, Res extends NodeResponseLike = NodeResponseLike>(
  options: WebhookHandlerOptions,
  listener: (event: WebhookEvent, req: Req, res: Res) => unknown,
): (req: Req, res: Res) => Promise<void> {
  return async (req, res) => {
    try {
      await handleNode(req, res, options, listener);
    } catch (err) {
      (options.onError ?? defaultOnError)(err, { deliveryId: null });
      send(res, json(500, { error: { code: 'internal_error', message: err instanceof Error ? err.message : 'Webhook handler error.' } }));
    }
  };
}

/**
 * An Express route handler that reads the raw body itself. Mount it before any `express.json()`
 * that would see this path (or with `express.raw({ type: 'application/json' })` in front of it);
 * if a JSON parser got the body first, it fails loudly through `next(err)` instead of rejecting
 * every delivery as forged.
 *
 * ```ts
 * app.post('/webhooks/chat', expressWebhookHandler({ secret }, async (event) => { ... }));
 * app.use(express.json()); // after, or on other paths only
 * ```
 */
export function expressWebhookHandler<Req extends NodeRequestLike = NodeRequestLike, Res extends NodeResponseLike = NodeResponseLike>(
  options: WebhookHandlerOptions,
  listener: (event: WebhookEvent, req: Req, res: Res) => unknown,
): (req: Req, res: Res, next: (err?: unknown) => void) => void {
  return (req, res, next) => {
    handleNode(req, res, options, listener).catch(next);
  };
}

// ---------------------------------------------------------------------------------------------
// Fastify

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  addContentTypeParser(
    contentType: string | string[],
    options: { parseAs: 'buffer'; bodyLimit?: number },
    parser: (request: unknown, body: Uint8Array | string, done: (err: Error | null, body?: unknown) => void) => void,
  ): unknown;
  removeContentTypeParser?(contentType: string | string[]): unknown;
  hasContentTypeParser?(contentType: string): boolean;
  post(path: string, handler: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>): unknown;
}

export interface FastifyRequestLike {
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  send(payload?: unknown): unknown;
  readonly sent?: boolean;
}

export interface FastifyWebhookOptions extends WebhookHandlerOptions {
  /** Route path inside the plugin's prefix. Default `/`. */
  path?: string;
  /** Your listener. */
  onEvent: (event: WebhookEvent, request: FastifyRequestLike, reply: FastifyReplyLike) => unknown;
}

/**
 * A Fastify plugin. It keeps the raw bytes by replacing the JSON parser inside its own
 * encapsulated context only, so your other routes keep Fastify's JSON parsing.
 *
 * ```ts
 * await app.register(fastifyWebhookPlugin, { prefix: '/webhooks/chat', secret, onEvent: async (event) => { ... } });
 * ```
 */
export function fastifyWebhookPlugin(instance: FastifyInstanceLike, options: FastifyWebhookOptions, done: (err?: Error) => void): void {
  try {
    const bodyLimit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
    const keepRaw = (_request: unknown, body: Uint8Array | string, next: (err: Error | null, body?: unknown) => void) => next(null, body);
    if (instance.removeContentTypeParser) instance.removeContentTypeParser(['application/json']);
    instance.addContentTypeParser(['application/json'], { parseAs: 'buffer', bodyLimit }, keepRaw);
    instance.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, keepRaw);
    instance.post(options.path ?? '/', async (request, reply) => {
      const body = request.body;
      const raw: RawBody = typeof body === 'string' ? body : (asBytes(body) ?? new Uint8Array(0));
      const outcome = await processWebhook(raw, request.headers, options, (event) => options.onEvent(event, request, reply));
      if (reply.sent) return reply;
      reply.code(outcome.status);
      for (const [name, value] of Object.entries(outcome.headers ?? {})) reply.header(name, value);
      return reply.header('Content-Type', 'application/json').send(outcome.body);
    });
    done();
  } catch (err) {
    done(err as Error);
  }
}
