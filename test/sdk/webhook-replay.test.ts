/**
 * The replay store's two states across receivers that share it, as several processes behind a
 * load balancer do: `processing` from verification until the listener resolves (a retry then gets
 * 503 and is tried again), `done` after it (a retry is a duplicate). A listener that throws, or a
 * process that dies mid-listener, must leave the event to the service's next retry, never to a
 * "200 duplicate" that drops it. Instance B is a second copy of the SDK's modules (nothing shared
 * in memory with A but the store), on its own HTTP server. The same runs against a private Redis
 * with the store of the SDK README. Last, the Fetch-style handler must stop reading a chunked body
 * at `maxBodyBytes`.
 */
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import Redis from 'ioredis';
import * as sdkA from '../../sdk/src';
import type { WebhookEvent, WebhookReplayStore, WebhookHandlerOptions, ClaimOnlyReplayStore } from '../../sdk/src';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';

let sdkB!: typeof sdkA;
jest.isolateModules(() => {
  sdkB = require('../../sdk/src');
});

const SECRET = 'whsec_' + 'r3pl4yST'.repeat(6);
let serial = 0;

/** A fresh event envelope (only the envelope matters to the replay logic). */
function newEvent(): WebhookEvent {
  serial++;
  return {
    id: `message.created:01replay${String(serial).padStart(4, '0')}${Date.now().toString(36)}`,
    event: 'message.created',
    createdAt: new Date().toISOString(),
    workspaceKey: 'ws_replaytest',
    data: { conversation: { id: 'conv_1' }, message: { id: `msg_${serial}`, content: 'hello' } },
  } as unknown as WebhookEvent;
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

interface Receiver {
  url: string;
  runs: string[];
  close(): Promise<void>;
}

/** One receiving process: its own copy of the SDK, its own server, the shared store. */
async function receiver(sdk: typeof sdkA, options: WebhookHandlerOptions, listener: (event: WebhookEvent) => unknown): Promise<Receiver> {
  const runs: string[] = [];
  const server = http.createServer(
    sdk.createNodeWebhookHandler({ onError: () => undefined, ...options }, async (event) => {
      runs.push(event.id);
      await listener(event);
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    runs,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** One attempt of the service: signed afresh, same id and body. */
async function deliver(url: string, event: WebhookEvent, attempt: number, signal?: AbortSignal) {
  const signed = await sdkA.signTestWebhook({ payload: event, secret: SECRET, attempt });
  const res = await fetch(url, { method: 'POST', headers: signed.headers, body: signed.rawBody, signal });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json: await res.json().catch(() => null) };
}

const DUPLICATE = { received: true, duplicate: true };

/** Resolves once the listener runs; fails at once if the attempt was answered without running it. */
async function listenerRuns(started: Promise<void>, attempt: Promise<unknown>): Promise<void> {
  const answeredFirst = attempt.then((answer) => {
    throw new Error(`the attempt was answered (${JSON.stringify(answer)}) without running the listener`);
  });
  answeredFirst.catch(() => undefined);
  await Promise.race([started, answeredFirst]);
}

/**
 * The three scenarios of the issue, against any shared store. `expireProcessing` makes the
 * `processing` entry of `id` run out, as its time to live does after a crash.
 */
function scenarios(
  makeStore: () => WebhookReplayStore,
  expireProcessing: (store: WebhookReplayStore, id: string) => Promise<void>,
  extra: Partial<WebhookHandlerOptions> = {},
) {
  test('a retry at instance B while A still runs the listener gets 503, and after A succeeds a duplicate', async () => {
    const seen = makeStore();
    const started = deferred();
    const finish = deferred();
    const a = await receiver(sdkA, { secret: SECRET, seen, ...extra }, async () => {
      started.resolve();
      await finish.promise;
    });
    const b = await receiver(sdkB, { secret: SECRET, seen, ...extra }, () => undefined);
    try {
      const event = newEvent();
      const first = deliver(a.url, event, 1);
      await listenerRuns(started.promise, first);
      const retry = await deliver(b.url, event, 2); // the service's retry after its time-out
      expect(retry.status).toBe(503);
      expect(retry.json.error.code).toBe('in_progress');
      expect(Number(retry.retryAfter)).toBeGreaterThan(0);
      expect(b.runs).toEqual([]);

      finish.resolve();
      expect(await first).toMatchObject({ status: 200, json: { received: true } });
      expect(await deliver(b.url, event, 3)).toMatchObject({ status: 200, json: DUPLICATE });
      expect(await deliver(a.url, event, 4)).toMatchObject({ status: 200, json: DUPLICATE });
      expect([...a.runs, ...b.runs]).toEqual([event.id]);
    } finally {
      finish.resolve();
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('a listener that throws releases the delivery: the next retry runs the listener again', async () => {
    const seen = makeStore();
    const started = deferred();
    const fail = deferred();
    const a = await receiver(sdkA, { secret: SECRET, seen, ...extra }, async () => {
      started.resolve();
      await fail.promise;
      throw new Error('CRM is down');
    });
    const b = await receiver(sdkB, { secret: SECRET, seen, ...extra }, () => undefined);
    try {
      const event = newEvent();
      const first = deliver(a.url, event, 1);
      await listenerRuns(started.promise, first);
      expect((await deliver(b.url, event, 2)).status).toBe(503); // still running at A: not a duplicate
      fail.resolve();
      expect((await first).status).toBe(500);
      expect(await deliver(b.url, event, 3)).toMatchObject({ status: 200, json: { received: true } });
      expect(b.runs).toEqual([event.id]);
      expect(await deliver(a.url, event, 4)).toMatchObject({ status: 200, json: DUPLICATE });
      expect(a.runs).toEqual([event.id]);
    } finally {
      fail.resolve();
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('instance A dies mid-listener: once its processing entry expires, the retry runs the listener', async () => {
    const seen = makeStore();
    const started = deferred();
    const never = deferred(); // A's listener never returns: the process is gone
    const a = await receiver(sdkA, { secret: SECRET, seen, ...extra }, async () => {
      started.resolve();
      await never.promise;
    });
    const b = await receiver(sdkB, { secret: SECRET, seen, ...extra }, () => undefined);
    const cut = new AbortController();
    try {
      const event = newEvent();
      const first = deliver(a.url, event, 1, cut.signal).catch((err: unknown) => err);
      await listenerRuns(started.promise, first);
      cut.abort(); // the service sees the connection drop
      expect(await first).toMatchObject({ name: 'AbortError' });
      await a.close();
      expect((await deliver(b.url, event, 2)).status).toBe(503); // within the processing time to live
      await expireProcessing(seen, event.id);
      expect(await deliver(b.url, event, 3)).toMatchObject({ status: 200, json: { received: true } });
      expect(b.runs).toEqual([event.id]);
      expect(await deliver(b.url, event, 4)).toMatchObject({ status: 200, json: DUPLICATE });
    } finally {
      never.resolve();
      await Promise.all([a.close(), b.close()]);
    }
  });
}

describe('two receivers sharing a MemoryReplayStore (each with its own copy of the SDK)', () => {
  let clock = Date.now();
  scenarios(
    () => new sdkA.MemoryReplayStore({ now: () => clock }),
    async () => {
      clock += 11_000; // past the default 10 s processing time to live
    },
  );
});

const haveRedis = spawnSync('redis-server', ['--version']).status === 0;

(haveRedis ? describe : describe.skip)('two receivers sharing Redis, with the store of the SDK README', () => {
  let server: ChildProcess | undefined;
  let dir: string;
  let redis: Redis;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-replay-redis-'));
    const port = await freePort();
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
    redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    await waitFor('redis-server to answer', async () => (await redis.ping().catch(() => null)) === 'PONG', 10_000);
  });
  afterAll(async () => {
    redis?.disconnect();
    server?.kill('SIGKILL');
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  // As in sdk/README.md ("Replays and retries").
  const redisStore = (): WebhookReplayStore => ({
    async begin(id, ttl) {
      if ((await redis.set(`chat-webhook:${id}`, 'processing', 'PX', Math.ceil(ttl * 1000), 'NX')) === 'OK') return 'started';
      return (await redis.get(`chat-webhook:${id}`)) === 'done' ? 'done' : 'processing';
    },
    complete: async (id, ttl) => void (await redis.set(`chat-webhook:${id}`, 'done', 'PX', Math.ceil(ttl * 1000))),
    release: async (id) => void (await redis.del(`chat-webhook:${id}`)),
  });

  scenarios(
    redisStore,
    // Redis expires the key itself: a 3 s processing time to live, waited out.
    async (_store, id) => waitFor('the processing key to expire', async () => (await redis.exists(`chat-webhook:${id}`)) === 0, 10_000),
    { processingTtlSeconds: 3 },
  );

  test('the keys hold `processing` with the short time to live, then `done` with the replay one', async () => {
    const store = redisStore();
    const started = deferred();
    const finish = deferred();
    const a = await receiver(sdkA, { secret: SECRET, seen: store, processingTtlSeconds: 30, replayTtlSeconds: 900 }, async () => {
      started.resolve();
      await finish.promise;
    });
    try {
      const event = newEvent();
      const first = deliver(a.url, event, 1);
      await listenerRuns(started.promise, first);
      expect(await redis.get(`chat-webhook:${event.id}`)).toBe('processing');
      const processingTtl = await redis.pttl(`chat-webhook:${event.id}`);
      expect(processingTtl).toBeGreaterThan(25_000);
      expect(processingTtl).toBeLessThanOrEqual(30_000);
      finish.resolve();
      expect((await first).status).toBe(200);
      expect(await redis.get(`chat-webhook:${event.id}`)).toBe('done');
      expect(await redis.pttl(`chat-webhook:${event.id}`)).toBeGreaterThan(890_000);
    } finally {
      finish.resolve();
      await a.close();
    }
  });
});

describe('the stores themselves', () => {
  test('MemoryReplayStore: begin is started once, then reports the state; done replaces processing; release forgets', () => {
    let now = 1_000_000;
    const store = new sdkA.MemoryReplayStore({ now: () => now });
    expect(store.begin('a', 5)).toBe('started');
    expect(store.begin('a', 5)).toBe('processing');
    expect(store.state('a')).toBe('processing');
    now += 5_001;
    expect(store.begin('a', 5)).toBe('started'); // the holder died: its claim ran out
    store.complete('a', 600);
    now += 10_000;
    expect(store.begin('a', 5)).toBe('done');
    expect(store.begin('b', 5)).toBe('started');
    store.release('b');
    expect(store.state('b')).toBeNull();
    expect(store.begin('b', 5)).toBe('started');
  });

  test('processingTtlSeconds is configurable and passed to begin; done lasts at least twice the tolerance', async () => {
    const calls: string[] = [];
    const store: WebhookReplayStore = {
      begin: (id, ttl) => (calls.push(`begin ${ttl}`), 'started'),
      complete: (id, ttl) => void calls.push(`complete ${ttl}`),
      release: () => void calls.push('release'),
    };
    const signed = await sdkA.signTestWebhook({ payload: newEvent(), secret: SECRET });
    await sdkA.processWebhook(signed.rawBody, signed.headers, { secret: SECRET, seen: store, processingTtlSeconds: 15, replayTtlSeconds: 60 }, () => undefined);
    expect(calls).toEqual(['begin 15', 'complete 600']); // 60 s would let a captured delivery replay: raised to 2 x 300 s
  });

  test('a replay store that is down answers 503 (the service retries), never 200 or a thrown error', async () => {
    const store: WebhookReplayStore = {
      begin: async () => {
        throw new Error('ECONNREFUSED');
      },
      complete: () => undefined,
      release: () => undefined,
    };
    const signed = await sdkA.signTestWebhook({ payload: newEvent(), secret: SECRET });
    const listener = jest.fn();
    const outcome = await sdkA.processWebhook(signed.rawBody, signed.headers, { secret: SECRET, seen: store, onError: () => undefined }, listener);
    expect(outcome.status).toBe(503);
    expect(outcome.headers).toEqual({ 'Retry-After': '10' });
    expect(listener).not.toHaveBeenCalled();
  });

  test('a store of SDK 0.1 (claim and release only) still works, with its old single state', async () => {
    const ids = new Set<string>();
    const legacy: ClaimOnlyReplayStore = {
      claim: (id) => (ids.has(id) ? false : (ids.add(id), true)),
      release: (id) => void ids.delete(id),
    };
    const event = newEvent();
    let fail = true;
    const send = async () => {
      const signed = await sdkA.signTestWebhook({ payload: event, secret: SECRET });
      return sdkA.processWebhook(signed.rawBody, signed.headers, { secret: SECRET, seen: legacy, onError: () => undefined }, () => {
        if (fail) throw new Error('once');
      });
    };
    expect((await send()).status).toBe(500);
    fail = false;
    expect((await send()).status).toBe(200);
    expect(JSON.parse((await send()).body)).toEqual(DUPLICATE);
  });

  test("verifyWebhook: by default the id is done at once; with markDone: 'later' it stays processing until complete", async () => {
    const seen = new sdkA.MemoryReplayStore();
    const event = newEvent();
    const signed = await sdkA.signTestWebhook({ payload: event, secret: SECRET });
    await sdkA.verifyWebhook({ ...signed, secret: SECRET, seen, markDone: 'later' });
    expect(seen.state(event.id)).toBe('processing');
    await expect(sdkA.verifyWebhook({ ...signed, secret: SECRET, seen })).rejects.toMatchObject({ reason: 'in_progress' });
    seen.complete(event.id, 600);
    await expect(sdkA.verifyWebhook({ ...signed, secret: SECRET, seen })).rejects.toMatchObject({ reason: 'replayed' });

    const other = await sdkA.signTestWebhook({ payload: newEvent(), secret: SECRET });
    const verified = await sdkA.verifyWebhook({ ...other, secret: SECRET, seen });
    expect(seen.state(verified.id)).toBe('done');
  });
});

describe('Fetch-style handler: body limit', () => {
  const CHUNK = 1024;

  /** A body of `chunks` chunks that counts what was pulled from it; nothing is produced ahead of reads. */
  function countedBody(chunks: number, fill = 0x61) {
    const tally = { pulledBytes: 0, cancelled: false };
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (sent === chunks) return controller.close();
          sent++;
          tally.pulledBytes += CHUNK;
          controller.enqueue(new Uint8Array(CHUNK).fill(fill));
        },
        cancel() {
          tally.cancelled = true;
        },
      },
      { highWaterMark: 0 },
    );
    return { stream, tally };
  }

  const post = (body: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
    new Request('http://receiver.test/hook', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
      duplex: 'half',
    } as RequestInit);

  test('a chunked body over maxBodyBytes is refused with 413 after reading at most the limit plus one chunk', async () => {
    const max = 4 * CHUNK;
    const { stream, tally } = countedBody(64); // 64 KiB, no Content-Length
    const listener = jest.fn();
    const response = await sdkA.handleWebhookRequest(post(stream), { secret: SECRET, maxBodyBytes: max, seen: false }, listener);
    expect(response.status).toBe(413);
    expect((await response.json()).error.code).toBe('payload_too_large');
    expect(tally.pulledBytes).toBeLessThanOrEqual(max + CHUNK);
    expect(tally.cancelled).toBe(true);
    expect(listener).not.toHaveBeenCalled();
  });

  test('a Content-Length over the limit is refused without reading the body', async () => {
    const { stream, tally } = countedBody(64);
    const request = post(stream, { 'Content-Length': String(64 * CHUNK) });
    expect(request.headers.get('content-length')).toBe(String(64 * CHUNK));
    const response = await sdkA.handleWebhookRequest(request, { secret: SECRET, maxBodyBytes: 4 * CHUNK, seen: false }, () => undefined);
    expect(response.status).toBe(413);
    expect(tally.pulledBytes).toBe(0);
  });

  test('a chunked body under the limit is read whole and verified', async () => {
    const signed = await sdkA.signTestWebhook({ payload: newEvent(), secret: SECRET });
    const bytes = new TextEncoder().encode(signed.rawBody);
    let offset = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(offset, offset + 7));
        offset += 7;
      },
    });
    const received: WebhookEvent[] = [];
    const response = await sdkA.handleWebhookRequest(
      post(stream, signed.headers),
      { secret: SECRET, maxBodyBytes: bytes.length, seen: new sdkA.MemoryReplayStore() },
      (e) => {
        received.push(e);
      },
    );
    expect(response.status).toBe(200);
    expect(received).toHaveLength(1);
  });
});
