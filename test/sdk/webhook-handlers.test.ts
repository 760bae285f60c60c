/**
 * The receivers for Express, Fastify, node:http and Fetch-style runtimes, each on a real server
 * (Fastify's own inject for Fastify), fed with real event payloads signed like the sender does.
 * The raw-body cases are the point: a JSON parser in front must fail loudly, not reject every
 * delivery as forged.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createHarness, Harness } from '../helpers/harness';
import { outboxEvents } from './helpers';
import {
  MemoryReplayStore,
  WebhookEvent,
  createNodeWebhookHandler,
  expressWebhookHandler,
  fastifyWebhookPlugin,
  handleWebhookRequest,
  signTestWebhook,
} from '../../sdk/src';
import { waitFor } from '../helpers/wait';

const SECRET = 'whsec_' + 'h4ndl3rs'.repeat(6);
let h: Harness;
let body: string;

beforeAll(async () => {
  h = await createHarness();
  await h.visitorSay(h.site.id, 'v-handlers', 'Where is my order?');
  body = (await outboxEvents(h, h.site.id)).find((e) => e.name === 'message.created')!.body;
});
afterAll(async () => {
  await h?.close();
});

async function listen(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function deliver(url: string, options: { payload?: string; secret?: string; attempt?: number; tamper?: boolean } = {}) {
  const signed = await signTestWebhook({ payload: options.payload ?? body, secret: options.secret ?? SECRET, attempt: options.attempt });
  const res = await fetch(url, { method: 'POST', headers: signed.headers, body: options.tamper ? signed.rawBody.replace('order', 'ORDER') : signed.rawBody });
  return { status: res.status, json: await res.json().catch(() => null) };
}

/** The behaviour every receiver must have, checked against one of them. */
async function contract(url: string, received: WebhookEvent[], failNext: { value: boolean }) {
  // Good delivery: 200, the listener got the typed event.
  expect(await deliver(url)).toEqual({ status: 200, json: { received: true } });
  expect(received).toHaveLength(1);
  expect(received[0]).toEqual(JSON.parse(body));
  // The service's retry of the same event: 200 (so it stops), the listener is not called again.
  expect(await deliver(url, { attempt: 2 })).toEqual({ status: 200, json: { received: true, duplicate: true } });
  expect(received).toHaveLength(1);
  // Forged: 400 with the reason (shown in the delivery log), the listener is not called.
  const forged = await deliver(url, { tamper: true, payload: body.replace('message.created:', 'message.created:') });
  expect(forged.status).toBe(400);
  expect(forged.json.error.reason).toBe('signature_mismatch');
  expect((await deliver(url, { secret: 'whsec_wrong' })).json.error.reason).toBe('signature_mismatch');
  expect(received).toHaveLength(1);
  // A listener that fails: 500, so the service retries, and the retry is accepted.
  const other = body.replace(/"id":"message\.created:[0-9a-z]+"/, '"id":"message.created:01aaaaaaaaaaaaaaaaaaaaaaaa"');
  failNext.value = true;
  expect((await deliver(url, { payload: other })).status).toBe(500);
  expect(await deliver(url, { payload: other, attempt: 2 })).toEqual({ status: 200, json: { received: true } });
  expect(received.map((e) => e.id)).toEqual([JSON.parse(body).id, 'message.created:01aaaaaaaaaaaaaaaaaaaaaaaa']);
}

function recorder() {
  const received: WebhookEvent[] = [];
  const failNext = { value: false };
  const listener = (event: WebhookEvent) => {
    if (failNext.value) {
      failNext.value = false;
      throw new Error('CRM is down');
    }
    received.push(event);
  };
  return { received, failNext, listener, errors: [] as unknown[] };
}

describe('Express', () => {
  test('reads the raw body itself: good, duplicate, forged, failing listener', async () => {
    const r = recorder();
    const app = express();
    app.post('/webhooks/chat', expressWebhookHandler({ secret: SECRET, seen: new MemoryReplayStore(), onError: (e) => r.errors.push(e) }, r.listener));
    app.use(express.json()); // after the webhook route: the app's other routes keep JSON parsing
    app.post('/other', (req, res) => res.json({ echo: req.body }));
    const server = await listen(app);
    try {
      await contract(`${server.url}/webhooks/chat`, r.received, r.failNext);
      expect(r.errors.map((e) => (e as Error).message)).toEqual(expect.arrayContaining([expect.stringMatching(/signature does not match/), 'CRM is down']));
      const other = await fetch(`${server.url}/other`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
      expect(await other.json()).toEqual({ echo: { a: 1 } });
    } finally {
      await server.close();
    }
  });

  test('behind express.raw() it uses the Buffer', async () => {
    const r = recorder();
    const app = express();
    app.post(
      '/hook',
      express.raw({ type: 'application/json' }),
      expressWebhookHandler({ secret: SECRET, seen: new MemoryReplayStore(), onError: () => undefined }, r.listener),
    );
    const server = await listen(app);
    try {
      await contract(`${server.url}/hook`, r.received, r.failNext);
    } finally {
      await server.close();
    }
  });

  test('behind express.json() it fails loudly through next(err) instead of refusing deliveries as forged', async () => {
    const app = express();
    app.use(express.json());
    const listener = jest.fn();
    app.post('/hook', expressWebhookHandler({ secret: SECRET, seen: new MemoryReplayStore() }, listener));
    const seen: string[] = [];
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      seen.push(err.message);
      res.status(500).json({ error: err.message });
    });
    const server = await listen(app);
    try {
      const res = await deliver(`${server.url}/hook`);
      expect(res.status).toBe(500);
      expect(seen[0]).toMatch(/already parsed/);
      expect(seen[0]).toMatch(/BEFORE express\.json\(\)/);
      expect(listener).not.toHaveBeenCalled();
    } finally {
      await server.close();
    }
  });

  test('GET is 405; a body over maxBodyBytes is 413', async () => {
    const app = express();
    app.all(
      '/hook',
      expressWebhookHandler({ secret: SECRET, maxBodyBytes: 100, onError: () => undefined }, () => undefined),
    );
    const server = await listen(app);
    try {
      expect((await fetch(`${server.url}/hook`)).status).toBe(405);
      expect((await deliver(`${server.url}/hook`)).status).toBe(413);
    } finally {
      await server.close();
    }
  });
});

describe('node:http', () => {
  test('createNodeWebhookHandler is a request listener', async () => {
    const r = recorder();
    const server = await listen(createNodeWebhookHandler({ secret: SECRET, seen: new MemoryReplayStore(), onError: () => undefined }, r.listener));
    try {
      await contract(server.url, r.received, r.failNext);
    } finally {
      await server.close();
    }
  });
});

describe('Fetch Request/Response (Deno, Bun, Workers, Next.js)', () => {
  test('handleWebhookRequest', async () => {
    const r = recorder();
    const options = { secret: SECRET, seen: new MemoryReplayStore(), onError: () => undefined };
    // Served by a real HTTP server that turns node requests into Fetch Requests, as edge adapters do.
    const server = await listen(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const request = new Request(`http://x${req.url}`, {
        method: req.method,
        headers: req.headers as Record<string, string>,
        body: req.method === 'POST' ? Buffer.concat(chunks) : undefined,
      });
      const response = await handleWebhookRequest(request, options, r.listener);
      res.writeHead(response.status, { 'Content-Type': response.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await response.arrayBuffer()));
    });
    try {
      await contract(server.url, r.received, r.failNext);
      expect((await fetch(server.url)).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});

/** A devDependency of sdk/, installed by `npm ci --prefix sdk`. */
function sdkDevDependency(name: string): string {
  try {
    return require.resolve(name, { paths: [`${__dirname}/../../sdk`] });
  } catch {
    throw new Error(`${name} is a devDependency of sdk/ and is not installed: run \`npm ci --prefix sdk\` at the repository root.`);
  }
}

interface FastifyApp {
  register(plugin: unknown, options: object): Promise<unknown>;
  post(path: string, handler: (request: { body: unknown }) => Promise<unknown>): void;
  listen(options: { port: number; host: string }): Promise<string>;
  server: { address(): AddressInfo | string | null };
  close(): Promise<void>;
}

describe('Fastify', () => {
  test('the plugin keeps the raw body in its own context; other routes keep JSON parsing', async () => {
    // fastify is a devDependency of sdk/ (npm ci --prefix sdk).
    // (Its types are checked against the plugin in the packaging test, where fastify resolves.)
    const Fastify = require(sdkDevDependency('fastify')) as (opts?: object) => FastifyApp;
    const r = recorder();
    const app = Fastify();
    await app.register(fastifyWebhookPlugin, {
      prefix: '/webhooks/chat',
      secret: SECRET,
      seen: new MemoryReplayStore(),
      onError: () => undefined,
      onEvent: r.listener,
    });
    app.post('/other', async (request) => ({ echo: request.body }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    try {
      await contract(`http://127.0.0.1:${port}/webhooks/chat`, r.received, r.failNext);
      const other = await fetch(`http://127.0.0.1:${port}/other`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
      expect(await other.json()).toEqual({ echo: { a: 1 } });
    } finally {
      await app.close();
    }
  });
});

describe('a retry that arrives while the first attempt is still running', () => {
  test('is answered 503 (retry later), not "duplicate", so a failing first run is not lost', async () => {
    const { processWebhook } = await import('../../sdk/src/webhook-handlers');
    const options = { secret: SECRET, seen: new MemoryReplayStore(), onError: () => undefined };
    const fresh = JSON.parse(body);
    fresh.id = `message.created:${'0'.repeat(10)}slowlistener0000`;
    let finishFirst!: (ok: boolean) => void;
    const gate = new Promise<boolean>((r) => (finishFirst = r));
    let runs = 0;
    const listener = async () => {
      runs++;
      if (runs === 1 && !(await gate)) throw new Error('the first run failed late');
    };
    const send = async () => {
      const signed = await signTestWebhook({ payload: fresh, secret: SECRET });
      return processWebhook(signed.rawBody, signed.headers, options, listener);
    };
    const first = send();
    await waitFor('the first delivery to be in its listener', () => runs === 1);
    const retry = await send(); // the service's retry after its 20 s time-out
    expect(retry.status).toBe(503);
    finishFirst(false);
    expect((await first).status).toBe(500);
    const later = await send(); // the next retry is processed
    expect(later.status).toBe(200);
    expect(runs).toBe(2);
    expect((await send()).status).toBe(200); // and a repeat after success is a duplicate
    expect(JSON.parse((await send()).body).duplicate).toBe(true);
  });
});
