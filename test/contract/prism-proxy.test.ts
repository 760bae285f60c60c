/**
 * Contract under traffic: real HTTPS traffic, through Stoplight Prism's validating proxy
 * (`prism proxy openapi/openapi.yaml <server> --errors`), to the real app configured as in
 * production (its own response validation off, so Prism is the only judge). Every operation and
 * its main error answers go through; any violation Prism reports fails the test.
 *
 * How Prism 5.14 reports: every request or response violation is listed in an `sl-violations`
 * header (a JSON array); with `--errors` a response violation of severity error replaces the
 * answer with its own `500 application/problem+json`, and an invalid request is not forwarded at
 * all (Prism answers 422, or 401 when the security requirement is not met). So each answer is
 * checked for: no `sl-violations` header, the status the server gives, and our own envelope.
 *
 * Two proxies over the same server:
 *  - `strict`: `--errors`, requests validated too. Every request here is valid per the document.
 *  - `lenient`: `--errors --validate-request=false`, for the answers to requests the document
 *    itself rejects (400, 413, 415), which `strict` would answer itself instead of the server;
 *    their answers are still validated. Multipart replies go here as well: Prism's multipart
 *    parser keeps only the last part of a name (`parse-multipart-data`, then one value per name),
 *    so it cannot see repeated `file` parts as the array the document (rightly) describes.
 * A canary on each proxy proves it validates answers at all: Prism passes everything silently
 * when it cannot use the document, and the lint test (generated.test.ts) is the other guard.
 */
import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch, FormData } from 'undici';
import { createHarness, listenHttps, Harness } from '../helpers/harness';
import { freePort, ROOT } from '../helpers/spawn';
import { friendlyName } from '../../server/visitors/display-name';
import { createApp } from '../../server/app';
import { createLogger } from '../../server/platform/logger';
import { createMemoryLimiter, RateLimiter, RateDecision } from '../../server/http/rate-limit/limiter';
import { deliveryEnv, Receiver, startReceiver } from '../webhooks/helpers';
import { newMember, PASSWORD, TEST_HASHER } from '../manage/helpers';
import { loadDocument } from '../../scripts/lib/openapi-doc';
import { sha256Hex } from '../../server/platform/crypto';

const PRISM_BIN = path.join(ROOT, 'node_modules/@stoplight/prism-cli/dist/index.js');
const DOCUMENT = path.join(ROOT, 'openapi/openapi.yaml');
const MANAGE_DOCUMENT = path.join(ROOT, 'openapi/manage.yaml');
const MAX_ATTACHMENT_BYTES = 4096; // small, so a 413 on a file needs only a few KiB through the proxy

interface Proxy {
  name: string;
  url: string;
  child: ChildProcess;
  log(): string;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  violations: string | null;
  what: string;
  proxy: Proxy;
}

let h: Harness;
let upstream: Awaited<ReturnType<typeof listenHttps>>;
let strict: Proxy;
let lenient: Proxy;
let manage: Proxy; // `--errors` over openapi/manage.yaml in front of /manage/v1
let manageLenient: Proxy; // the same with --validate-request=false, for the server's own 400
let receiver: Receiver;
let tmpDir: string;
const agent = new Agent({ keepAliveTimeout: 1000 });
const started: ChildProcess[] = [];

// Rate limits through the real authenticate path; a test marks a bucket exhausted to get a 429.
const exhausted = new Set<string>();
let clientIpsExhausted = false;
const base = createMemoryLimiter(100_000);
const full = (): RateDecision => ({ allowed: false, limit: 300, remaining: 0, resetSeconds: 42 });
const isExhausted = (bucket: string) => exhausted.has(bucket) || (clientIpsExhausted && !bucket.startsWith('key:'));
const limiter: RateLimiter = {
  ...base,
  hit: async (bucket) => (isExhausted(bucket) ? full() : base.hit(bucket)),
  reserve: async (bucket) => (isExhausted(bucket) ? { ...full(), release: async () => {} } : base.reserve(bucket)),
};

// Seeded data
let convIds: string[]; // three open conversations, oldest first
let fileConv: { id: string; mediaId: string; mediaUrl: string };
let closedId: string;
let other: { key: string; convId: string; mediaId: string };
let readOnlyKey: string;
let mediaOnlyKey: string;
let throttled: { key: string; keyId: string };
const FILE_TEXT = 'notes from the visitor\n';

async function startPrism(name: string, extraArgs: string[], caFile: string, document = DOCUMENT, basePath = '/api/v1'): Promise<Proxy> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [PRISM_BIN, 'proxy', document, `${upstream.url}${basePath}`, '--errors', '--host', '127.0.0.1', '--port', String(port), '--cors=false', ...extraArgs],
    // The upstream's certificate is self-signed: trusted by this child only, nothing disabled.
    { cwd: ROOT, env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile, FORCE_COLOR: '0', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  started.push(child);
  let log = '';
  const keep = (d: Buffer) => {
    log = (log + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} Prism did not start in 120 s:\n${log}`)), 120_000);
    const check = () => {
      if (/Prism is listening/.test(log)) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} Prism exited (${code}) before listening:\n${log}`));
    });
  });
  return { name, url: `http://127.0.0.1:${port}`, child, log: () => log };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

beforeAll(async () => {
  receiver = await startReceiver();
  h = await createHarness({ env: { ...deliveryEnv(receiver), MAX_ATTACHMENT_BYTES: String(MAX_ATTACHMENT_BYTES) }, limiter, passwordHasher: TEST_HASHER });
  const services = h.runtime.services;
  convIds = [];
  for (const visitor of ['v-1', 'v-2', 'v-3']) convIds.push((await h.visitorSay(h.site.id, visitor, `hello from ${visitor}`)).conversation.id);
  await h.visitorSay(h.site.id, 'v-1', 'a second message');
  const withFile = await services.window.chat.visitorSay(h.site.id, 'v-file', 'see the file', {
    files: [{ buffer: Buffer.from(FILE_TEXT), originalName: 'notes "draft".txt', mimeType: 'text/plain' }],
  });
  const attachment = withFile.message.attachments[0];
  fileConv = { id: withFile.conversation.id, mediaId: attachment.id, mediaUrl: attachment.url };
  closedId = (await h.visitorSay(h.site.id, 'v-closed', 'bye')).conversation.id;
  await services.conversations.close(h.site.id, closedId);
  const otherSite = await h.newSite('Other');
  const otherFile = await services.window.chat.visitorSay(otherSite.id, 'v-o', 'theirs', {
    files: [{ buffer: Buffer.from('theirs'), originalName: 'theirs.txt', mimeType: 'text/plain' }],
  });
  other = { key: otherSite.key, convId: otherFile.conversation.id, mediaId: otherFile.message.attachments[0].id };
  readOnlyKey = (await h.newKey(h.site.id, ['conversations:read'])).key;
  mediaOnlyKey = (await h.newKey(h.site.id, ['media:read'])).key;
  const t = await h.newKey(h.site.id, ['conversations:read', 'conversations:write', 'media:read']);
  throttled = { key: t.key, keyId: t.id };

  // The production configuration: answers are not validated by the app itself.
  const app = createApp({ services, logger: createLogger('silent'), limiter, validateResponses: false, ready: async () => true });
  upstream = await listenHttps(app);
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prism-proxy-'));
  const caFile = path.join(tmpDir, 'upstream-ca.pem');
  fs.writeFileSync(caFile, upstream.ca);
  [strict, lenient, manage, manageLenient] = await Promise.all([
    startPrism('strict', [], caFile),
    startPrism('lenient', ['--validate-request=false'], caFile),
    startPrism('manage', [], caFile, MANAGE_DOCUMENT, '/manage/v1'),
    startPrism('manage-lenient', ['--validate-request=false'], caFile, MANAGE_DOCUMENT, '/manage/v1'),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all(started.map(stop));
  await agent.close();
  await upstream?.close();
  await h?.close();
  await receiver?.close();
  if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
});

interface SendOptions {
  key?: string | null;
  json?: unknown;
  body?: string | FormData;
  headers?: Record<string, string>;
}

async function send(proxy: Proxy, method: string, urlPath: string, opts: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
  let body: string | FormData | undefined = opts.body;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await fetch(proxy.url + urlPath, { method, headers, body, dispatcher: agent });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // binary or empty bodies
  }
  return {
    status: res.status,
    headers: res.headers as unknown as Headers,
    text,
    json,
    violations: res.headers.get('sl-violations'),
    what: `${proxy.name}: ${method} ${urlPath}`,
    proxy,
  };
}

/** The answer is the server's (not Prism's), with this status and error code, and Prism saw no violation. */
function expectAnswer(answer: Answer, status: number, code?: string): Answer {
  const problems: string[] = [];
  if (answer.violations) problems.push(`Prism reported violations: ${answer.violations}`);
  if (answer.status !== status) problems.push(`status ${answer.status}, expected ${status}`);
  if (status >= 400) {
    if (!/^application\/json/.test(answer.headers.get('content-type') ?? ''))
      problems.push(`content-type ${answer.headers.get('content-type')} (Prism's own answer?)`);
    if (answer.json?.error?.code !== code) problems.push(`error code ${answer.json?.error?.code}, expected ${code}`);
  }
  if (problems.length) {
    throw new Error(
      `${answer.what}\n  ${problems.join('\n  ')}\n  body: ${answer.text.slice(0, 600)}\n--- Prism log (tail) ---\n${answer.proxy.log().slice(-3000)}`,
    );
  }
  return answer;
}

const apiPath = (signedUrl: string) => {
  const u = new URL(signedUrl);
  return u.pathname.replace(/^\/api\/v1/, '') + u.search;
};

describe('through the strict proxy (requests and answers validated, --errors)', () => {
  test('conversations: list with filters and paging, read one', async () => {
    const first = expectAnswer(await send(strict, 'GET', '/conversations?limit=2', { key: h.site.key }), 200);
    expect(first.json.data).toHaveLength(2);
    expect(first.json.page.hasMore).toBe(true);
    const cursor = encodeURIComponent(first.json.page.nextCursor);
    const second = expectAnswer(await send(strict, 'GET', `/conversations?limit=2&cursor=${cursor}`, { key: h.site.key }), 200);
    expect(second.json.data.length).toBeGreaterThan(0);

    const since = encodeURIComponent(new Date(Date.now() - 3600_000).toISOString());
    const until = encodeURIComponent(new Date(Date.now() + 3600_000).toISOString());
    const filtered = expectAnswer(
      await send(
        strict,
        'GET',
        `/conversations?state=open&createdAfter=${since}&createdBefore=${until}&updatedAfter=${since}&updatedBefore=${until}&limit=100`,
        { key: h.site.key },
      ),
      200,
    );
    expect(filtered.json.data.every((c: { state: string }) => c.state === 'open')).toBe(true);
    expectAnswer(await send(strict, 'GET', '/conversations?state=closed', { key: h.site.key }), 200);

    const one = expectAnswer(await send(strict, 'GET', `/conversations/${convIds[0]}`, { key: h.site.key }), 200);
    expect(one.json.data.id).toBe(convIds[0]);
    expect(one.headers.get('x-ratelimit-limit')).toBeTruthy();

    // A cursor in the documented form that this service did not issue: the server's 400.
    const tampered = first.json.page.nextCursor.replace(/.$/, (c: string) => (c === 'A' ? 'B' : 'A'));
    expectAnswer(await send(strict, 'GET', `/conversations?limit=2&cursor=${encodeURIComponent(tampered)}`, { key: h.site.key }), 400, 'invalid_request');
  });

  test('messages: list both orders with paging', async () => {
    const asc = expectAnswer(await send(strict, 'GET', `/conversations/${convIds[0]}/messages?limit=1`, { key: h.site.key }), 200);
    expect(asc.json.page.hasMore).toBe(true);
    expectAnswer(
      await send(strict, 'GET', `/conversations/${convIds[0]}/messages?limit=1&cursor=${encodeURIComponent(asc.json.page.nextCursor)}`, { key: h.site.key }),
      200,
    );
    const desc = expectAnswer(await send(strict, 'GET', `/conversations/${fileConv.id}/messages?order=desc`, { key: h.site.key }), 200);
    expect(desc.json.data[0].attachments).toHaveLength(1);
  });

  test('replies: JSON, Idempotency-Key with its replay and reuse, a key still running, closed conversation', async () => {
    expectAnswer(await send(strict, 'POST', `/conversations/${convIds[1]}/messages`, { key: h.site.key, json: { content: 'Hello from the proxy test' } }), 201);

    const idem = { 'Idempotency-Key': `prism-${Date.now()}` };
    const body = { content: 'Your order **#1042** has shipped.', format: 'markdown' };
    const created = expectAnswer(await send(strict, 'POST', `/conversations/${convIds[1]}/messages`, { key: h.site.key, json: body, headers: idem }), 201);
    const replay = expectAnswer(await send(strict, 'POST', `/conversations/${convIds[1]}/messages`, { key: h.site.key, json: body, headers: idem }), 201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json.data.id).toBe(created.json.data.id);
    expectAnswer(
      await send(strict, 'POST', `/conversations/${convIds[1]}/messages`, { key: h.site.key, json: { content: 'something else' }, headers: idem }),
      422,
      'idempotency_key_reused',
    );

    // The first request with a key is held inside the service while a repeat arrives.
    const messages = h.runtime.services.messages;
    const realReply = messages.reply.bind(messages);
    let release!: () => void;
    let entered!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const spy = jest.spyOn(messages, 'reply').mockImplementationOnce(async (...args: Parameters<typeof messages.reply>) => {
      entered();
      await gate;
      return realReply(...args);
    });
    try {
      const running = { 'Idempotency-Key': `prism-running-${Date.now()}` };
      const firstCall = send(strict, 'POST', `/conversations/${convIds[2]}/messages`, { key: h.site.key, json: { content: 'slow one' }, headers: running });
      await inside;
      expectAnswer(
        await send(strict, 'POST', `/conversations/${convIds[2]}/messages`, { key: h.site.key, json: { content: 'slow one' }, headers: running }),
        409,
        'idempotency_key_in_use',
      );
      release();
      expectAnswer(await firstCall, 201);
    } finally {
      release();
      spy.mockRestore();
    }

    expectAnswer(
      await send(strict, 'POST', `/conversations/${closedId}/messages`, { key: h.site.key, json: { content: 'too late' } }),
      409,
      'conversation_closed',
    );
  });

  test('close: open to closed, then the same card again', async () => {
    const closing = await h.visitorSay(h.site.id, 'v-to-close', 'please close');
    const closed = expectAnswer(await send(strict, 'POST', `/conversations/${closing.conversation.id}/close`, { key: h.site.key }), 200);
    expect(closed.json.data.state).toBe('closed');
    const again = expectAnswer(await send(strict, 'POST', `/conversations/${closing.conversation.id}/close`, { key: h.site.key }), 200);
    expect(again.json.data.closedAt).toBe(closed.json.data.closedAt);
  });

  test('media: by key, 304 on its ETag, by signed link, and a tampered link', async () => {
    const byKey = expectAnswer(await send(strict, 'GET', `/media/${fileConv.mediaId}`, { key: mediaOnlyKey }), 200);
    expect(byKey.text).toBe(FILE_TEXT);
    expect(byKey.headers.get('content-disposition')).toMatch(/^attachment; /);
    const etag = byKey.headers.get('etag')!;
    expectAnswer(await send(strict, 'GET', `/media/${fileConv.mediaId}`, { key: mediaOnlyKey, headers: { 'If-None-Match': etag } }), 304);

    const byLink = expectAnswer(await send(strict, 'GET', apiPath(fileConv.mediaUrl), { key: null }), 200);
    expect(byLink.text).toBe(FILE_TEXT);
    expect(byLink.headers.get('x-ratelimit-limit')).toBeNull(); // keyless: limited per client IP, no key counters

    const tampered = new URL(fileConv.mediaUrl);
    tampered.searchParams.set('expires', String(Number(tampered.searchParams.get('expires')) + 1));
    expectAnswer(await send(strict, 'GET', apiPath(tampered.toString()), { key: null }), 401, 'unauthorized');
  });

  test('published schemas', async () => {
    const list = expectAnswer(await send(strict, 'GET', '/schemas'), 200);
    for (const { url } of list.json.data as { url: string }[]) {
      const schema = expectAnswer(await send(strict, 'GET', url.replace(/^\/api\/v1/, '')), 200);
      expect(schema.json.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    }
  });

  test('401, 403 and 404 from the server', async () => {
    expectAnswer(await send(strict, 'GET', '/conversations', { key: 'wck_not_a_real_key_00000000000000000000000' }), 401, 'unauthorized');
    expectAnswer(await send(strict, 'GET', '/conversations', { key: mediaOnlyKey }), 403, 'insufficient_scope');
    expectAnswer(await send(strict, 'POST', `/conversations/${convIds[0]}/messages`, { key: readOnlyKey, json: { content: 'x' } }), 403, 'insufficient_scope');
    expectAnswer(await send(strict, 'POST', `/conversations/${convIds[0]}/close`, { key: readOnlyKey }), 403, 'insufficient_scope');
    expectAnswer(await send(strict, 'GET', `/media/${fileConv.mediaId}`, { key: readOnlyKey }), 403, 'insufficient_scope');
    expectAnswer(await send(strict, 'GET', `/conversations/${other.convId}`, { key: h.site.key }), 404, 'not_found');
    expectAnswer(await send(strict, 'GET', `/conversations/${other.convId}/messages`, { key: h.site.key }), 404, 'not_found');
    expectAnswer(await send(strict, 'POST', `/conversations/${other.convId}/messages`, { key: h.site.key, json: { content: 'x' } }), 404, 'not_found');
    expectAnswer(await send(strict, 'POST', `/conversations/${other.convId}/close`, { key: h.site.key }), 404, 'not_found');
    expectAnswer(await send(strict, 'GET', `/media/${other.mediaId}`, { key: h.site.key }), 404, 'not_found');
  });

  test('429 on a key and on a client IP', async () => {
    exhausted.add(`key:${throttled.keyId}`);
    try {
      const limited = expectAnswer(await send(strict, 'GET', '/conversations', { key: throttled.key }), 429, 'rate_limit_exceeded');
      expect(limited.headers.get('retry-after')).toBe('42');
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      expectAnswer(
        await send(strict, 'POST', `/conversations/${convIds[0]}/messages`, { key: throttled.key, json: { content: 'x' } }),
        429,
        'rate_limit_exceeded',
      );
    } finally {
      exhausted.clear();
    }
    clientIpsExhausted = true;
    try {
      expectAnswer(await send(strict, 'GET', '/schemas'), 429, 'rate_limit_exceeded');
      expectAnswer(await send(strict, 'GET', '/schemas/message.created.json'), 429, 'rate_limit_exceeded');
      expectAnswer(await send(strict, 'GET', apiPath(fileConv.mediaUrl)), 429, 'rate_limit_exceeded');
    } finally {
      clientIpsExhausted = false;
    }
  });

  test('500 and 503 answers keep the documented envelope', async () => {
    const services = h.runtime.services;
    const boom = jest.spyOn(services.conversations, 'list').mockRejectedValueOnce(new Error('boom: internal detail'));
    try {
      expectAnswer(await send(strict, 'GET', '/conversations', { key: h.site.key }), 500, 'internal_error');
    } finally {
      boom.mockRestore();
    }
    const down = jest
      .spyOn(services.conversations, 'get')
      .mockRejectedValueOnce(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED' }));
    try {
      expectAnswer(await send(strict, 'GET', `/conversations/${convIds[0]}`, { key: h.site.key }), 503, 'service_unavailable');
    } finally {
      down.mockRestore();
    }
    const limiterDown = jest.spyOn(limiter, 'hit').mockRejectedValueOnce(new Error('boom: limiter'));
    try {
      expectAnswer(await send(strict, 'GET', '/schemas'), 500, 'internal_error');
    } finally {
      limiterDown.mockRestore();
    }
  });
});

describe('through the lenient proxy (answers validated; requests the document rejects reach the server)', () => {
  test('multipart replies with one and with two files', async () => {
    const one = new FormData();
    one.append('content', 'here is the file');
    one.append('file', new Blob(['first file\n'], { type: 'text/plain' }), 'first.txt');
    const created = expectAnswer(await send(lenient, 'POST', `/conversations/${convIds[2]}/messages`, { key: h.site.key, body: one }), 201);
    expect(created.json.data.attachments).toHaveLength(1);
    // Its signed link opens through the strict proxy too.
    const download = expectAnswer(await send(strict, 'GET', apiPath(created.json.data.attachments[0].url)), 200);
    expect(download.text).toBe('first file\n');

    const two = new FormData();
    two.append('content', '');
    two.append('format', 'plain');
    two.append('file', new Blob(['a'], { type: 'text/plain' }), 'a.txt');
    two.append('file', new Blob(['{"b":1}'], { type: 'application/json' }), 'b.json');
    const both = expectAnswer(
      await send(lenient, 'POST', `/conversations/${convIds[2]}/messages`, {
        key: h.site.key,
        body: two,
        headers: { 'Idempotency-Key': `prism-mp-${Date.now()}` },
      }),
      201,
    );
    expect(both.json.data.attachments.map((a: { mimeType: string }) => a.mimeType)).toEqual(['text/plain', 'application/json']);
  });

  test('400 on values the document rejects', async () => {
    const key = { key: h.site.key };
    expectAnswer(await send(lenient, 'GET', '/conversations?limit=0', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/conversations?state=archived', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/conversations?createdAfter=yesterday', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/conversations?cursor=not%20a%20cursor', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/conversations/not-an-id', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', `/conversations/${convIds[0]}/messages?order=sideways`, key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, json: { content: 42 } }), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, json: { content: 'x', extra: true } }), 400, 'invalid_request');
    expectAnswer(
      await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, json: { content: 'x' }, headers: { 'Idempotency-Key': 'x'.repeat(256) } }),
      400,
      'invalid_request',
    );
    expectAnswer(await send(lenient, 'POST', '/conversations/conv_nope/close', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/media/med_nope', key), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/schemas?page=2'), 400, 'invalid_request');
    expectAnswer(await send(lenient, 'GET', '/schemas/secrets.json'), 400, 'invalid_request');
  });

  test('413 and 415', async () => {
    const key = { key: h.site.key };
    expectAnswer(
      await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, json: { content: 'x'.repeat(70 * 1024) } }),
      413,
      'payload_too_large',
    );
    const big = new FormData();
    big.append('content', 'too big');
    big.append('file', new Blob(['y'.repeat(MAX_ATTACHMENT_BYTES + 1)], { type: 'text/plain' }), 'big.txt');
    expectAnswer(await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, body: big }), 413, 'payload_too_large');
    expectAnswer(
      await send(lenient, 'POST', `/conversations/${convIds[0]}/messages`, { ...key, body: 'hello', headers: { 'Content-Type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
  });
});

describe('the proxies do report violations', () => {
  // A card that breaks the document (visitorId must be a string): each proxy must refuse it.
  test.each(['strict', 'lenient'])('%s', async (which) => {
    const proxy = which === 'strict' ? strict : lenient;
    const services = h.runtime.services;
    const card = (await services.conversations.get(h.site.id, convIds[0])) as object;
    const spy = jest.spyOn(services.conversations, 'get').mockResolvedValueOnce({ ...card, visitorId: 42 } as never);
    try {
      const answer = await send(proxy, 'GET', `/conversations/${convIds[0]}`, { key: h.site.key });
      expect(answer.status).toBe(500);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(answer.violations).toContain('visitorId');
    } finally {
      spy.mockRestore();
    }
  });
});

/**
 * The management API (openapi/manage.yaml) through its own proxies: representative traffic over
 * every operation, successes and the main errors, each answer unchanged by Prism and without
 * violations. `streamInbox` is the one operation not sent: Prism's proxy reads the whole upstream
 * body before it validates and answers, and an event stream never ends: no status line came back
 * within 6 s when tried (the fuzz and
 * test/manage/inbox-live.test.ts check its initial answer instead).
 */
describe('the management API through its proxies (manage.yaml, --errors)', () => {
  const SAME = { 'Sec-Fetch-Site': 'same-origin' };
  let site: string;
  let ownerToken: string;
  let agentToken: string;
  let ownerId: string;
  let targetId: string;
  let otherSite: string;
  const sent = new Set<string>();
  const t = (token: string, extra: Record<string, string> = {}) => ({ key: token, headers: extra });
  async function m(method: string, urlPath: string, status: number, opts: SendOptions & { op: string; code?: string; proxy?: Proxy }): Promise<Answer> {
    sent.add(opts.op);
    return expectAnswer(await send(opts.proxy ?? manage, method, urlPath, opts), status, opts.code);
  }

  beforeAll(async () => {
    site = h.site.id;
    const accounts = h.runtime.services.accounts;
    const token = async (email: string) =>
      (
        await accounts.tokens.create(
          { manager: { accountId: (await accounts.signIn.signIn(email, PASSWORD, {})).account.id, email, via: 'session' }, clientIp: null },
          'prism',
        )
      ).token;
    ownerId = (await newMember(h, site, 'prism-owner@example.com', 'owner')).id;
    await newMember(h, site, 'prism-agent@example.com', 'agent');
    targetId = (await newMember(h, site, 'prism-target@example.com', 'agent')).id;
    ownerToken = await token('prism-owner@example.com');
    agentToken = await token('prism-agent@example.com');
    otherSite = (await h.newSite('Prism other')).id;
  });

  test('session, password and tokens', async () => {
    const signed = await m('POST', '/session', 200, { op: 'signIn', json: { email: 'prism-owner@example.com', password: PASSWORD }, headers: SAME });
    const cookie = signed.headers.get('set-cookie')!.split(';')[0];
    expect(cookie).toMatch(/^__Host-session=/);
    await m('POST', '/session', 401, {
      op: 'signIn',
      code: 'unauthorized',
      json: { email: 'prism-owner@example.com', password: 'a wrong password!' },
      headers: SAME,
    });
    const current = await m('GET', '/session', 200, { op: 'getSession', headers: { Cookie: cookie } });
    expect(current.json.data.session.current).toBe(true);
    expect((await m('GET', '/session', 200, { op: 'getSession' })).json).toEqual({ data: null });
    const me = await m('GET', '/me', 200, { op: 'getMe', headers: { Cookie: cookie } });
    expect(me.json.data.via).toBe('session');
    await m('GET', '/me', 401, { op: 'getMe', code: 'unauthorized', key: 'wcm_notarealtoken0000000000000000000000000000' });
    const sessions = await m('GET', '/sessions', 200, { op: 'listSessions', headers: { Cookie: cookie } });
    const another = sessions.json.data.find((s: { current: boolean }) => !s.current);
    await m('DELETE', `/sessions/${another.id}`, 204, { op: 'endSession', ...t(ownerToken) });
    await m('DELETE', `/sessions/${another.id}`, 404, { op: 'endSession', code: 'not_found', ...t(ownerToken) });
    await m('POST', '/password', 204, {
      op: 'changePassword',
      json: { currentPassword: PASSWORD, newPassword: PASSWORD },
      headers: { Cookie: cookie, ...SAME },
    });
    // A change by cookie without same-origin proof: the server's 403, which Prism passes.
    await m('POST', '/tokens', 403, {
      op: 'createToken',
      code: 'cross_site_request',
      json: { label: 'x' },
      headers: { Cookie: cookie, 'Sec-Fetch-Site': 'cross-site' },
    });
    // A token never mints a token: only a session inside its sudo window does.
    await m('POST', '/tokens', 403, { op: 'createToken', code: 'forbidden', json: { label: 'minted by a token' }, ...t(ownerToken) });
    await m('POST', '/session/sudo', 200, { op: 'reauthenticate', json: { password: PASSWORD }, headers: { Cookie: cookie, ...SAME } });
    const created = await m('POST', '/tokens', 201, { op: 'createToken', json: { label: 'prism script' }, headers: { Cookie: cookie, ...SAME } });
    await m('GET', '/tokens', 200, { op: 'listTokens', ...t(ownerToken) });
    await m('GET', '/security-log?limit=5', 200, { op: 'listSecurityLog', ...t(ownerToken) });
    await m('DELETE', `/tokens/${created.json.data.id}`, 204, { op: 'revokeToken', ...t(ownerToken) });
    await m('DELETE', '/tokens/mtk_00000000000000000000000000', 404, { op: 'revokeToken', code: 'not_found', ...t(ownerToken) });
    await m('DELETE', '/session', 204, { op: 'signOut', headers: { Cookie: cookie, ...SAME } });
  });

  test('sites, origins, identity, embed, keys', async () => {
    await m('GET', '/sites', 200, { op: 'listMySites', ...t(ownerToken) });
    await m('POST', '/sites', 201, { op: 'createSite', json: { name: 'Prism made' }, ...t(ownerToken) });
    await m('GET', `/sites/${site}`, 200, { op: 'getSite', ...t(ownerToken) });
    await m('GET', `/sites/${site}`, 403, { op: 'getSite', code: 'forbidden', ...t(agentToken) });
    await m('GET', `/sites/${otherSite}`, 404, { op: 'getSite', code: 'not_found', ...t(ownerToken) });
    await m('PATCH', `/sites/${site}`, 200, { op: 'updateSite', json: { name: 'Prism site', identityMode: 'optional' }, ...t(ownerToken) });
    await m('PUT', `/sites/${site}/allowed-origins`, 200, { op: 'replaceAllowedOrigins', json: { origins: ['https://shop.example'] }, ...t(ownerToken) });
    await m('POST', `/sites/${site}/allowed-origins`, 200, { op: 'addAllowedOrigin', json: { origin: 'https://m.shop.example' }, ...t(ownerToken) });
    await m('GET', `/sites/${site}/allowed-origins`, 200, { op: 'listAllowedOrigins', ...t(ownerToken) });
    await m('DELETE', `/sites/${site}/allowed-origins?origin=${encodeURIComponent('https://m.shop.example')}`, 200, {
      op: 'removeAllowedOrigin',
      ...t(ownerToken),
    });
    await m('POST', `/sites/${site}/identity-secret/rotate`, 200, { op: 'rotateIdentitySecret', ...t(ownerToken) });
    await m('GET', `/sites/${site}/embed`, 200, { op: 'getEmbedSnippet', ...t(ownerToken) });
    // A page outside the allowed origins is refused before anything is fetched.
    await m('POST', `/sites/${site}/embed/check`, 400, {
      op: 'checkEmbed',
      code: 'invalid_request',
      json: { url: 'https://not-allowed.example/' },
      ...t(ownerToken),
    });
    await m('POST', `/sites/${site}/embed/check`, 403, { op: 'checkEmbed', code: 'forbidden', json: { url: 'https://shop.example/' }, ...t(agentToken) });
    await m('GET', `/sites/${site}/visitor-files`, 200, { op: 'getVisitorFiles', ...t(ownerToken) });
    await m('PATCH', `/sites/${site}/visitor-files`, 200, { op: 'updateVisitorFiles', json: { enabled: true, types: ['image/*'] }, ...t(ownerToken) });
    await m('POST', `/sites/${site}/visitor-revocations`, 200, { op: 'revokeVisitors', json: { visitorId: 'prism-gone' }, ...t(ownerToken) });
    const key = await m('POST', `/sites/${site}/keys`, 201, { op: 'createKey', json: { label: 'Prism', scopes: ['conversations:read'] }, ...t(ownerToken) });
    await m('GET', `/sites/${site}/keys?limit=2`, 200, { op: 'listKeys', ...t(ownerToken) });
    await m('DELETE', `/sites/${site}/keys/${key.json.data.id}`, 200, { op: 'revokeKey', ...t(ownerToken) });
    await m('GET', `/sites/${site}/keys?limit=0`, 400, { op: 'listKeys', code: 'invalid_request', proxy: manageLenient, ...t(ownerToken) });
  });

  test('members, invitations, audit log', async () => {
    await m('GET', `/sites/${site}/members`, 200, { op: 'listMembers', ...t(agentToken) });
    await m('PATCH', `/sites/${site}/members/${targetId}`, 200, { op: 'changeMemberRole', json: { role: 'owner' }, ...t(ownerToken) });
    await m('PATCH', `/sites/${site}/members/${targetId}`, 403, { op: 'changeMemberRole', code: 'forbidden', json: { role: 'agent' }, ...t(agentToken) });
    await m('DELETE', `/sites/${site}/members/${targetId}/sessions`, 200, { op: 'endMemberSessions', ...t(ownerToken) });
    await m('DELETE', `/sites/${site}/members/${targetId}`, 204, { op: 'removeMember', ...t(ownerToken) });
    await m('DELETE', `/sites/${site}/members/${targetId}`, 404, { op: 'removeMember', code: 'not_found', ...t(ownerToken) });
    const inv = await m('POST', `/sites/${site}/invitations`, 201, {
      op: 'createInvitation',
      json: { email: 'prism-new@example.com', role: 'agent' },
      ...t(ownerToken),
    });
    await m('POST', '/invitations/accept', 200, {
      op: 'acceptInvitation',
      json: { token: inv.json.data.token, email: 'prism-new@example.com', password: PASSWORD },
      headers: SAME,
    });
    await m('POST', '/invitations/accept', 404, { op: 'acceptInvitation', code: 'not_found', json: { token: inv.json.data.token }, ...t(ownerToken) });
    const pending = await m('POST', `/sites/${site}/invitations`, 201, {
      op: 'createInvitation',
      json: { email: 'prism-pending@example.com', role: 'agent' },
      ...t(ownerToken),
    });
    await m('GET', `/sites/${site}/invitations?limit=5`, 200, { op: 'listInvitations', ...t(ownerToken) });
    await m('GET', `/sites/${site}/invitations`, 403, { op: 'listInvitations', code: 'forbidden', ...t(agentToken) });
    await m('DELETE', `/sites/${site}/invitations/${pending.json.data.id}`, 204, { op: 'revokeInvitation', ...t(ownerToken) });
    await m('DELETE', `/sites/${site}/invitations/${pending.json.data.id}`, 404, { op: 'revokeInvitation', code: 'not_found', ...t(ownerToken) });
    // Accounts exist here, so no setup link is valid: the one answer for any token.
    await m('POST', '/setup', 404, {
      op: 'completeSetup',
      code: 'not_found',
      json: { token: 'A'.repeat(43), email: 'prism-first@example.com', password: PASSWORD },
      headers: SAME,
    });
    await m('GET', `/sites/${site}/audit-log?limit=5`, 200, { op: 'listAuditLog', ...t(ownerToken) });
  });

  test('inbox', async () => {
    const said = await h.visitorSay(site, 'prism-visitor', 'hello from the window');
    const conv = said.conversation.id;
    const base = `/sites/${site}/inbox/conversations`;
    await m('GET', `${base}?state=open&assignee=any&limit=5`, 200, { op: 'listInboxConversations', ...t(agentToken) });
    await m('GET', `${base}/${conv}`, 200, { op: 'getInboxConversation', ...t(agentToken) });
    await m('POST', `${base}/${conv}/messages`, 201, { op: 'replyFromInbox', json: { content: 'We are on it.' }, ...t(agentToken) });
    await m('GET', `${base}/${conv}/messages?order=desc`, 200, { op: 'listInboxMessages', ...t(agentToken) });
    await m('POST', `${base}/${conv}/read`, 200, { op: 'markInboxConversationRead', ...t(agentToken) });
    await m('POST', `${base}/${conv}/typing`, 204, { op: 'reportAgentTyping', json: { typing: true }, ...t(agentToken) });
    await m('GET', `${base}/${conv}/seen`, 200, { op: 'getInboxSeen', ...t(agentToken) });
    await m('POST', `${base}/${conv}/assignee`, 200, { op: 'assignInboxConversation', json: { assigneeId: ownerId }, ...t(ownerToken) });
    await m('POST', `${base}/${conv}/close`, 200, { op: 'closeInboxConversation', ...t(agentToken) });
    await m('POST', `${base}/${conv}/messages`, 409, { op: 'replyFromInbox', code: 'conversation_closed', json: { content: 'too late' }, ...t(agentToken) });
    const theirs = await h.visitorSay(otherSite, 'prism-other', 'not yours');
    await m('GET', `${base}/${theirs.conversation.id}`, 404, { op: 'getInboxConversation', code: 'not_found', ...t(agentToken) });
    await m('GET', `/sites/${site}/conversations/${conv}/timeline?limit=10`, 200, { op: 'getConversationTimeline', ...t(agentToken) });
    await m('GET', `${base}/${conv}/visitor`, 200, { op: 'getInboxVisitor', ...t(agentToken) });
    await m('GET', `/sites/${site}/visitor-context`, 200, { op: 'getVisitorContextSettings', ...t(ownerToken) });
    await m('PATCH', `/sites/${site}/visitor-context`, 200, { op: 'updateVisitorContextSettings', json: { keepQuery: false }, ...t(ownerToken) });
    const hours = {
      enabled: true,
      timeZone: 'Europe/Berlin',
      week: { mon: [['09:00', '17:00']], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] },
      awayMessage: null,
    };
    await m('PUT', `/sites/${site}/business-hours`, 200, { op: 'updateBusinessHours', json: hours, ...t(ownerToken) });
    await m('GET', `/sites/${site}/business-hours`, 200, { op: 'getBusinessHours', ...t(ownerToken) });
    await m('POST', `/sites/${site}/visitor-deletions`, 200, { op: 'deleteVisitorData', json: { visitorId: 'prism-visitor' }, ...t(ownerToken) });
  });

  test('internal notes', async () => {
    const conv = (await h.visitorSay(site, 'prism-notes-visitor', 'hello')).conversation.id;
    const notes = `/sites/${site}/inbox/conversations/${conv}/notes`;
    const note = await m('POST', notes, 201, {
      op: 'createInboxNote',
      json: { content: '@prism-owner@example.com refund?', format: 'markdown' },
      ...t(agentToken),
    });
    await m('GET', `${notes}?order=desc&limit=5`, 200, { op: 'listInboxNotes', ...t(ownerToken) });
    await m('PATCH', `${notes}/${note.json.data.id}`, 200, { op: 'updateInboxNote', json: { content: 'refund sent' }, ...t(agentToken) });
    await m('PATCH', `${notes}/${note.json.data.id}`, 403, { op: 'updateInboxNote', code: 'forbidden', json: { content: 'not mine' }, ...t(ownerToken) });
    await m('DELETE', `${notes}/${note.json.data.id}`, 204, { op: 'deleteInboxNote', ...t(ownerToken) });
    await m('DELETE', `${notes}/${note.json.data.id}`, 404, { op: 'deleteInboxNote', code: 'not_found', ...t(ownerToken) });
  });

  test('shared replies, display names, agent names', async () => {
    await m('PATCH', '/me', 200, { op: 'updateMe', json: { displayName: 'Prism Owner' }, ...t(ownerToken) });
    await m('PATCH', '/me', 400, { op: 'updateMe', code: 'invalid_request', json: { displayName: 'Prism\u202E' }, ...t(ownerToken) });
    const r = `/sites/${site}/shared-replies`;
    const made = await m('POST', r, 201, { op: 'createSharedReply', json: { title: 'Prism', body: 'Hi {visitor.firstName|there}' }, ...t(ownerToken) });
    await m('POST', r, 409, { op: 'createSharedReply', code: 'conflict', json: { title: 'PRISM', body: 'again' }, ...t(ownerToken) });
    await m('POST', r, 403, { op: 'createSharedReply', code: 'forbidden', json: { title: 'Agent', body: 'x' }, ...t(agentToken) });
    await m('POST', `/sites/${site}/shared-reply-imports`, 200, {
      op: 'importSharedReplies',
      json: { replies: [{ title: 'Imported', body: 'x' }] },
      ...t(ownerToken),
    });
    await m('GET', r, 200, { op: 'listSharedReplies', ...t(agentToken) });
    await m('PATCH', `${r}/${made.json.data.id}`, 200, { op: 'updateSharedReply', json: { body: 'Hello {visitor.name}' }, ...t(ownerToken) });
    const said = await h.visitorSay(site, 'prism-replies', 'hello');
    const filled = await m('GET', `/sites/${site}/inbox/conversations/${said.conversation.id}/shared-replies`, 200, {
      op: 'listConversationSharedReplies',
      ...t(agentToken),
    });
    expect(filled.json.data.find((x: { title: string }) => x.title === 'Prism').text).toBe(`Hello ${friendlyName('prism-replies')}`);
    await m('DELETE', `${r}/${made.json.data.id}`, 204, { op: 'deleteSharedReply', ...t(ownerToken) });
    await m('GET', `/sites/${site}/agent-names`, 200, { op: 'getAgentNames', ...t(ownerToken) });
    await m('PUT', `/sites/${site}/agent-names`, 200, { op: 'setAgentNames', json: { shown: false }, ...t(ownerToken) });
    await m('PUT', `/sites/${site}/agent-names`, 200, { op: 'setAgentNames', json: { shown: true }, ...t(ownerToken) });
  });

  test("tags: the site's list and a conversation's tags", async () => {
    const list = `/sites/${site}/tags`;
    const made = await m('POST', list, 201, { op: 'createTag', json: { name: 'Prism tag' }, ...t(ownerToken) });
    await m('POST', list, 409, { op: 'createTag', code: 'conflict', json: { name: 'PRISM TAG' }, ...t(ownerToken) });
    await m('POST', list, 403, { op: 'createTag', code: 'forbidden', json: { name: 'Agent tag' }, ...t(agentToken) });
    await m('GET', list, 200, { op: 'listTags', ...t(agentToken) });
    await m('PATCH', `${list}/${made.json.data.id}`, 200, { op: 'renameTag', json: { name: 'Prism renamed' }, ...t(ownerToken) });
    const said = await h.visitorSay(site, 'prism-tags', 'hello');
    const on = `/sites/${site}/inbox/conversations/${said.conversation.id}/tags/${made.json.data.id}`;
    expect((await m('PUT', on, 200, { op: 'tagInboxConversation', ...t(agentToken) })).json.data).toEqual([{ id: made.json.data.id, name: 'Prism renamed' }]);
    await m('DELETE', on, 200, { op: 'untagInboxConversation', ...t(agentToken) });
    await m('DELETE', `${list}/${made.json.data.id}`, 204, { op: 'deleteTag', ...t(ownerToken) });
  });

  test('email: forgot password, the mail log, the test email', async () => {
    await m('POST', '/password-resets', 202, { op: 'requestPasswordReset', json: { email: 'prism-owner@example.com' }, headers: SAME });
    await m('POST', '/password-resets', 202, { op: 'requestPasswordReset', json: { email: 'nobody@example.com' }, headers: SAME });
    // A link whose token is known here: written as the service writes it (only the hash is stored).
    const account = await h.runtime.services.accounts.registry.create('prism-reset@example.com', PASSWORD);
    const token = `prism${'R'.repeat(38)}`;
    const at = Date.now();
    await h.runtime
      .db('password_resets')
      .insert({ id: 'pwr_prism', account_id: account.id, token_hash: sha256Hex(token), created_at: at, expires_at: at + 3600_000, used_at: null });
    const reset = '/password-resets/complete';
    await m('POST', reset, 200, { op: 'completePasswordReset', json: { token, newPassword: 'a brand new passphrase' }, headers: SAME });
    await m('POST', reset, 404, { op: 'completePasswordReset', code: 'not_found', json: { token, newPassword: 'a brand new passphrase' }, headers: SAME });
    const log = `/sites/${site}/mail-log`;
    await m('POST', `${log}/test`, 202, { op: 'sendTestEmail', ...t(ownerToken) });
    await m('POST', `${log}/test`, 403, { op: 'sendTestEmail', code: 'forbidden', ...t(agentToken) });
    await m('GET', `${log}?limit=5`, 200, { op: 'listMailLog', ...t(ownerToken) });
    await m('GET', log, 403, { op: 'listMailLog', code: 'forbidden', ...t(agentToken) });
  });

  test('verified email, changing it, emails of waiting visitors, unsubscribe', async () => {
    await m('POST', '/email-verifications', 202, { op: 'resendEmailVerification', ...t(ownerToken) });
    await m('POST', '/email-changes', 202, {
      op: 'requestEmailChange',
      json: { newEmail: 'prism-moved@example.com', password: PASSWORD },
      ...t(ownerToken),
    });
    // A verification link whose token is known here: written as the service writes it (only the hash is stored).
    const account = await h.runtime.services.accounts.registry.create('prism-verify@example.com', PASSWORD);
    const token = `prism${'V'.repeat(38)}`;
    const at = Date.now();
    await h.runtime.db('email_links').insert({
      id: 'elk_prism',
      account_id: account.id,
      email: 'prism-verify@example.com',
      token_hash: sha256Hex(token),
      created_at: at,
      expires_at: at + 24 * 3600_000,
      used_at: null,
    });
    const complete = '/email-links/complete';
    await m('POST', complete, 200, { op: 'completeEmailLink', json: { token }, headers: SAME });
    await m('POST', complete, 404, { op: 'completeEmailLink', code: 'not_found', json: { token }, headers: SAME });
    const alerts = `/sites/${site}/me/alerts`;
    await m('GET', alerts, 200, { op: 'getMyAlerts', ...t(agentToken) });
    await m('PUT', alerts, 200, { op: 'setMyAlerts', json: { mode: 'assigned', waitMinutes: 10 }, ...t(agentToken) });
    const link = new URL(h.runtime.services.unsubscribe.url({ kind: 'member', siteId: site, accountId: ownerId })).pathname.replace(/^\/manage\/v1/, '');
    await m('GET', link, 200, { op: 'showUnsubscribe' });
    const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
    await m('POST', link, 200, { op: 'unsubscribe', body: 'List-Unsubscribe=One-Click', headers: form });
    await m('POST', `${link.slice(0, -4)}AAAA`, 404, { op: 'unsubscribe', code: 'not_found', body: 'List-Unsubscribe=One-Click', headers: form });
  });

  test('event address, secrets, test delivery, delivery log, recovery', async () => {
    const e = `/sites/${site}/event-address`;
    expect((await m('GET', e, 200, { op: 'getEventAddress', ...t(ownerToken) })).json).toEqual({ data: null });
    await m('PUT', e, 201, { op: 'setEventAddress', json: { url: receiver.url('/prism'), events: ['message.created'] }, ...t(ownerToken) });
    await m('PUT', e, 200, {
      op: 'setEventAddress',
      json: { url: receiver.url('/prism'), events: ['message.created', 'conversation.closed'] },
      ...t(ownerToken),
    });
    await m('GET', e, 200, { op: 'getEventAddress', ...t(ownerToken) });
    await m('GET', e, 403, { op: 'getEventAddress', code: 'forbidden', ...t(agentToken) });
    await m('PATCH', e, 200, { op: 'changeEventAddressState', json: { enabled: true }, ...t(ownerToken) });
    await m('POST', `${e}/secret/rotate`, 200, { op: 'rotateEventSecret', ...t(ownerToken) });
    await m('POST', `${e}/secret/roll`, 200, { op: 'rollEventSecret', json: {}, ...t(ownerToken) });
    await m('DELETE', `${e}/secret/roll`, 200, { op: 'cancelEventSecretRoll', ...t(ownerToken) });
    await m('POST', `${e}/secret/roll`, 200, { op: 'rollEventSecret', json: {}, ...t(ownerToken) });
    await m('POST', `${e}/secret/switch`, 200, { op: 'switchEventSecret', ...t(ownerToken) });
    await m('POST', `${e}/test`, 200, { op: 'sendTestEvent', json: { event: 'message.created' }, ...t(ownerToken) });
    await h.visitorSay(site, 'prism-events', 'an event to deliver');
    const log = await m('GET', `/sites/${site}/deliveries?limit=5`, 200, { op: 'listDeliveries', ...t(ownerToken) });
    const eventId = encodeURIComponent(log.json.data[0].eventId);
    await m('GET', `/sites/${site}/deliveries/${eventId}`, 200, { op: 'getDelivery', ...t(ownerToken) });
    await m('POST', `/sites/${site}/deliveries/${eventId}/redeliver`, 202, { op: 'redeliverDelivery', ...t(ownerToken) });
    const since = encodeURIComponent(new Date(Date.now() - 3600_000).toISOString());
    await m('GET', `/sites/${site}/delivery-recovery?since=${since}`, 200, { op: 'countRecoverableDeliveries', ...t(ownerToken) });
    await m('POST', `/sites/${site}/delivery-recovery`, 202, {
      op: 'recoverDeliveries',
      json: { since: new Date(Date.now() - 3600_000).toISOString() },
      ...t(ownerToken),
    });
  });

  test('every operation but the event stream went through', () => {
    expect(
      documentOperationIds()
        .filter((op) => !sent.has(op))
        .sort(),
    ).toEqual(['streamInbox']);
  });

  test('the proxy reports a violation: an answer the document does not allow', async () => {
    const accounts = h.runtime.services.accounts.signIn;
    const real = accounts.me.bind(accounts);
    const spy = jest
      .spyOn(accounts, 'me')
      .mockImplementationOnce(async (...args: Parameters<typeof accounts.me>) => ({ ...(await real(...args)), via: 42 }) as never);
    try {
      const answer = await send(manage, 'GET', '/me', { key: ownerToken });
      expect(answer.status).toBe(500);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(answer.violations).toContain('via');
    } finally {
      spy.mockRestore();
    }
  });
});

function documentOperationIds(): string[] {
  const doc = loadDocument(MANAGE_DOCUMENT) as { paths: Record<string, Record<string, { operationId?: string }>> };
  return Object.values(doc.paths).flatMap((item) =>
    Object.values(item).flatMap((op) => (op && typeof op === 'object' && op.operationId ? [op.operationId] : [])),
  );
}
