/**
 * Typed errors: every error answer of the real server becomes the matching `ApiError` subclass
 * with status, code, message, details and request id, and is not retried; failures without an
 * answer become connection, time-out or abort errors.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { startSdkServer, SdkServer } from './helpers';
import {
  ApiConnectionError,
  ApiError,
  ApiTimeoutError,
  AuthenticationError,
  BadRequestError,
  ChatClient,
  ChatError,
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RequestAbortedError,
  UnprocessableEntityError,
  createClient,
} from '../../sdk/src';
import { makeSelfSignedCert } from '../../server/platform/tls';

let s: SdkServer;
let chat: ChatClient;
let conversationId: string;

beforeAll(async () => {
  s = await startSdkServer();
  chat = s.client();
  conversationId = (await s.h.visitorSay(s.h.site.id, 'v-errors', 'hello')).conversation.id;
});
afterAll(async () => {
  await s?.close();
});

/** Runs `fn`, expects it to throw, returns the error and how many requests were sent. */
async function failure(fn: () => Promise<unknown>): Promise<{ err: ApiError; sent: number }> {
  const before = s.exchanges.length;
  try {
    await fn();
  } catch (err) {
    return { err: err as ApiError, sent: s.exchanges.length - before };
  }
  throw new Error('expected a failure');
}

function expectApiError(err: ApiError, cls: new (...args: never[]) => ApiError, status: number, code: string) {
  expect(err).toBeInstanceOf(cls);
  expect(err).toBeInstanceOf(ApiError);
  expect(err).toBeInstanceOf(ChatError);
  expect(err).toBeInstanceOf(Error);
  expect(err.name).toBe(cls.name);
  expect(err.status).toBe(status);
  expect(err.code).toBe(code);
  expect(typeof err.message).toBe('string');
  expect(err.message.length).toBeGreaterThan(0);
  expect(err.requestId).toMatch(/^req_/);
  expect(err.headers.get('x-request-id')).toBe(err.requestId);
  expect(err.attempts).toBe(1);
}

describe('API errors, one subclass per status, never retried', () => {
  test('401 unauthorized: wrong key, revoked key', async () => {
    const wrong = await failure(() => s.client({ apiKey: 'wck_' + 'x'.repeat(43) }).conversations.get(conversationId));
    expectApiError(wrong.err, AuthenticationError, 401, 'unauthorized');
    expect(wrong.sent).toBe(1);

    const key = await s.h.newKey(s.h.site.id, ['conversations:read']);
    await s.h.runtime.services.access.revokeKey(key.id);
    const revoked = await failure(() => s.client({ apiKey: key.key }).conversations.list().firstPage());
    expectApiError(revoked.err, AuthenticationError, 401, 'unauthorized');
  });

  test('403 insufficient_scope: reply, close and media without the right', async () => {
    const readOnly = s.client({ apiKey: (await s.h.newKey(s.h.site.id, ['conversations:read'])).key });
    const reply = await failure(() => readOnly.messages.create(conversationId, { content: 'no' }));
    expectApiError(reply.err, PermissionDeniedError, 403, 'insufficient_scope');
    expect(reply.err.message).toMatch(/conversations:write/);
    expect(reply.sent).toBe(1);
    expectApiError((await failure(() => readOnly.conversations.close(conversationId))).err, PermissionDeniedError, 403, 'insufficient_scope');
    const withFile = await chat.messages.create(conversationId, { files: [{ data: new Uint8Array([1, 2]), name: 'a.bin' }] });
    const media = await failure(() => readOnly.media.download(withFile.attachments[0].id));
    expectApiError(media.err, PermissionDeniedError, 403, 'insufficient_scope');
    expect(media.err.message).toMatch(/media:read/);
  });

  test("404 not_found: missing, and another site's conversation and media look the same", async () => {
    const missing = await failure(() => chat.conversations.get('conv_00000000000000000000000000'));
    expectApiError(missing.err, NotFoundError, 404, 'not_found');
    const other = await s.h.newSite('Other site');
    const otherChat = s.client({ apiKey: other.key });
    expectApiError((await failure(() => otherChat.conversations.get(conversationId))).err, NotFoundError, 404, 'not_found');
    expectApiError((await failure(() => otherChat.messages.create(conversationId, { content: 'x' }))).err, NotFoundError, 404, 'not_found');
    expectApiError((await failure(() => otherChat.messages.list(conversationId).toArray())).err, NotFoundError, 404, 'not_found');
    const file = await chat.messages.create(conversationId, { files: [{ data: new Uint8Array([3]), name: 'b.bin' }] });
    expectApiError((await failure(() => otherChat.media.download(file.attachments[0].id))).err, NotFoundError, 404, 'not_found');
    expectApiError((await failure(() => chat.media.download('med_00000000000000000000000000'))).err, NotFoundError, 404, 'not_found');
  });

  test('409 conversation_closed: a reply to a closed conversation', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-closed', 'bye')).conversation.id;
    await chat.conversations.close(id);
    const closed = await failure(() => chat.messages.create(id, { content: 'too late' }));
    expectApiError(closed.err, ConflictError, 409, 'conversation_closed');
    expect(closed.sent).toBe(1);
  });

  test('422 idempotency_key_reused: the same key with another body', async () => {
    await chat.messages.create(conversationId, { content: 'first' }, { idempotencyKey: 'reuse-me' });
    const reused = await failure(() => chat.messages.create(conversationId, { content: 'second' }, { idempotencyKey: 'reuse-me' }));
    expectApiError(reused.err, UnprocessableEntityError, 422, 'idempotency_key_reused');
  });

  test('400 invalid_request with details: a bad limit, a tampered cursor, an empty reply', async () => {
    const limit = await failure(() => chat.conversations.list({ limit: 1000 }).firstPage());
    expectApiError(limit.err, BadRequestError, 400, 'invalid_request');
    expect(limit.err.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '/query/limit' })]));
    const page = await chat.conversations.list({ limit: 1 }).firstPage();
    const cursor = await failure(() => chat.conversations.list({ limit: 1, cursor: page.nextCursor!.slice(0, -2) + 'xx' }).firstPage());
    expectApiError(cursor.err, BadRequestError, 400, 'invalid_request');
    const empty = await failure(() => chat.messages.create(conversationId, { content: '' }));
    expectApiError(empty.err, BadRequestError, 400, 'invalid_request');
    expect(empty.err.details!.length).toBeGreaterThan(0);
    expectApiError((await failure(() => chat.conversations.get('not-an-id'))).err, BadRequestError, 400, 'invalid_request');
  });

  test('413 payload_too_large: a JSON body over 64 KiB', async () => {
    const big = await failure(() => chat.messages.create(conversationId, { content: 'x'.repeat(70 * 1024) }));
    expectApiError(big.err, PayloadTooLargeError, 413, 'payload_too_large');
  });
});

describe('a code this SDK does not know (a newer service added it)', () => {
  /** A client whose every call is answered `status` with the error envelope carrying `code`. */
  const answering = (status: number, code: string) =>
    createClient({
      apiKey: s.h.site.key,
      baseUrl: 'https://chat.example/api/v1',
      maxRetries: 0,
      fetch: async () =>
        new Response(JSON.stringify({ error: { code, message: `A ${code} failure.` } }), {
          status,
          headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'req_newer' },
        }),
    });

  test('still becomes the typed error of its status, with the code as sent', async () => {
    const conflict = await answering(409, 'conversation_archived')
      .conversations.get(conversationId)
      .catch((e) => e);
    expect(conflict).toBeInstanceOf(ConflictError);
    expect(conflict.code).toBe('conversation_archived');
    expect(conflict.message).toBe('A conversation_archived failure.');
    expect(conflict.requestId).toBe('req_newer');

    const teapot = await answering(418, 'brewing')
      .conversations.get(conversationId)
      .catch((e) => e);
    expect(teapot).toBeInstanceOf(ApiError);
    expect(teapot.name).toBe('ApiError');
    expect(teapot.status).toBe(418);
    expect(teapot.code).toBe('brewing');
  });
});

describe('no answer: connection, time-out, abort', () => {
  /** A loopback HTTP server (plaintext is allowed for loopback) that accepts and then misbehaves. */
  async function misbehaving(handler: http.RequestListener): Promise<{ url: string; requests: number; close(): Promise<void> }> {
    const state = { requests: 0 };
    const server = http.createServer((req, res) => {
      state.requests++;
      handler(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}/api/v1`,
      get requests() {
        return state.requests;
      },
      close: () =>
        new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
    };
  }

  async function freePort(): Promise<number> {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((r) => server.close(() => r()));
    return port;
  }

  test('refused connection: retried, then ApiConnectionError with the cause', async () => {
    const port = await freePort();
    const client = createClient({ apiKey: s.h.site.key, baseUrl: `http://127.0.0.1:${port}/api/v1`, maxRetries: 2, retry: { initialRetryDelayMs: 10 } });
    const err = await client.conversations.get(conversationId).catch((e) => e);
    expect(err).toBeInstanceOf(ApiConnectionError);
    expect(err).not.toBeInstanceOf(ApiTimeoutError);
    expect(err.attempts).toBe(3);
    expect(err.message).toMatch(/ECONNREFUSED/);
    expect(err.cause).toBeDefined();
  });

  test('an untrusted certificate is not retried: it will not heal', async () => {
    // The global fetch does not trust the test server's self-signed certificate.
    const client = createClient({ apiKey: s.h.site.key, baseUrl: s.baseUrl, maxRetries: 3 });
    const err = await client.conversations.get(conversationId).catch((e) => e);
    expect(err).toBeInstanceOf(ApiConnectionError);
    expect(err.attempts).toBe(1);
    expect(err.message).toMatch(/CERT|SELF_SIGNED|certificate/i);
  });

  test('no answer within timeoutMs: ApiTimeoutError after each attempt timed out', async () => {
    const server = await misbehaving(() => undefined); // never answers
    try {
      const client = createClient({ apiKey: s.h.site.key, baseUrl: server.url, timeoutMs: 150, maxRetries: 1, retry: { initialRetryDelayMs: 10 } });
      const started = Date.now();
      const err = await client.conversations.get(conversationId).catch((e) => e);
      expect(err).toBeInstanceOf(ApiTimeoutError);
      expect(err).toBeInstanceOf(ApiConnectionError);
      expect(err.attempts).toBe(2);
      expect(server.requests).toBe(2);
      expect(Date.now() - started).toBeGreaterThanOrEqual(300); // two time-outs waited out (a lower bound: load only adds)
      // A per-call time-out overrides the client's.
      const quick = await client.conversations.get(conversationId, { timeoutMs: 50, maxRetries: 0 }).catch((e) => e);
      expect(quick).toBeInstanceOf(ApiTimeoutError);
      expect(quick.attempts).toBe(1);
    } finally {
      await server.close();
    }
  });

  test('a body that stalls after the headers is a time-out too', async () => {
    const server = await misbehaving((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '100' });
      res.write('{"data":');
    });
    try {
      const client = createClient({ apiKey: s.h.site.key, baseUrl: server.url, timeoutMs: 200, maxRetries: 0 });
      await expect(client.conversations.get(conversationId)).rejects.toBeInstanceOf(ApiTimeoutError);
    } finally {
      await server.close();
    }
  });

  test("the caller's signal aborts a call in flight and one waiting to retry", async () => {
    const hanging = await misbehaving(() => undefined);
    try {
      const client = createClient({ apiKey: s.h.site.key, baseUrl: hanging.url, timeoutMs: 10_000 });
      const controller = new AbortController();
      const started = Date.now();
      const pending = client.conversations.get(conversationId, { signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      const err = await pending.catch((e) => e);
      expect(err).toBeInstanceOf(RequestAbortedError);
      expect(err.name).toBe('AbortError');
      // Liveness, not speed: it ended at the abort, long before its own 10 s time-out.
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await hanging.close();
    }

    const port = await freePort();
    const client = createClient({
      apiKey: s.h.site.key,
      baseUrl: `http://127.0.0.1:${port}/api/v1`,
      maxRetries: 5,
      retry: { initialRetryDelayMs: 10_000, maxRetryDelayMs: 10_000 },
    });
    const started = Date.now();
    const err = await client.conversations
      .list({}, { signal: AbortSignal.timeout(200) })
      .firstPage()
      .catch((e) => e);
    expect(err).toBeInstanceOf(RequestAbortedError);
    // Liveness: the 10 s wait before the retry was cut short by the abort.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('an HTML error page from a proxy still becomes a typed error', async () => {
    const tls = await makeSelfSignedCert();
    const server = https.createServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
      res.writeHead(502, { 'Content-Type': 'text/html' });
      res.end('<html><body><h1>502 Bad Gateway</h1></body></html>');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const { Agent, fetch: undiciFetch } = await import('undici');
      const agent = new Agent({ connect: { ca: tls.cert } });
      const client = createClient({
        apiKey: s.h.site.key,
        baseUrl: `https://localhost:${port}/api/v1`,
        maxRetries: 1,
        retry: { initialRetryDelayMs: 10 },
        fetch: (url, init) => undiciFetch(url, { ...(init as object), dispatcher: agent } as never) as unknown as Promise<Response>,
      });
      const err = await client.conversations.get(conversationId).catch((e) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err.name).toBe('InternalServerError');
      expect(err.status).toBe(502);
      expect(err.code).toBe('unexpected_response');
      expect(err.message).toMatch(/502 Bad Gateway/);
      expect(err.attempts).toBe(2);
      await agent.close();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
