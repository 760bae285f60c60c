/**
 * The embed check against real local pages (HTTP and HTTPS servers on 127.0.0.1), through the
 * management API on both engines: what it finds, what it refuses, and that it stays within its
 * bounds (redirects, time, bytes, private networks, the per-site budget).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import request from 'supertest';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { createEmbedCheck, EMBED_CHECK_LIMITS } from '../../server/sites/embed-check';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';
import type { Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from '../manage/helpers';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface Pages {
  origin: string;
  url(p: string): string;
  on(p: string, handler: Handler): void;
  /** Requests received, by path. */
  hits(p: string): IncomingMessage[];
  close(): Promise<void>;
}

/** A local web server (HTTPS with a self-signed certificate, or HTTP) whose paths answer as a test says. */
async function startPages(kind: 'http' | 'https', host: 'localhost' | '127.0.0.1', cert?: { cert: string; key: string }): Promise<Pages> {
  const handlers = new Map<string, Handler>();
  const received: IncomingMessage[] = [];
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    received.push(req);
    const p = (req.url ?? '/').split('?')[0];
    const h = handlers.get(p);
    if (h) h(req, res);
    else {
      res.writeHead(404, { 'Content-Type': 'text/html' });
      res.end('<h1>Not found</h1>');
    }
  };
  const server = kind === 'https' ? https.createServer({ cert: cert!.cert, key: cert!.key }, handle) : http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `${kind}://${host}:${port}`;
  return {
    origin,
    url: (p) => `${origin}${p}`,
    on: (p, h) => void handlers.set(p, h),
    hits: (p) => received.filter((r) => (r.url ?? '/').split('?')[0] === p),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const html =
  (body: string, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', ...headers });
    res.end(`<!doctype html><html><head><title>Shop</title></head><body><h1>Tea</h1>${body}</body></html>`);
  };
const redirect =
  (location: string, status = 302): Handler =>
  (_req, res) => {
    res.writeHead(status, { Location: location });
    res.end();
  };

let h: Harness;
let strict: Harness; // WEBHOOK_ALLOW_PRIVATE_NETWORKS=false
let secure: Pages; // https://localhost:port, allowed
let plain: Pages; // http://127.0.0.1:port, allowed
let foreign: Pages; // http://localhost:port, NOT allowed
let caDir: string;
let site: string;
let owner: string; // cookie
let agent: string; // cookie
let snippetSrc: string;
// The limiter's clock moves two minutes before each test, so each starts with the site's whole
// budget of checks (the budget test spends one on purpose).
let clock = Date.now();
beforeEach(() => {
  clock += 120_000;
});

beforeAll(async () => {
  const cert = await makeSelfSignedCert();
  caDir = fs.mkdtempSync(path.join(os.tmpdir(), 'embed-check-'));
  fs.writeFileSync(path.join(caDir, 'ca.pem'), cert.cert);
  const env = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_CA_FILE: path.join(caDir, 'ca.pem') };
  h = await manageHarness({ env, limiter: createMemoryLimiter(300, () => clock) });
  strict = await manageHarness({ env: { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' } });
  secure = await startPages('https', 'localhost', cert);
  plain = await startPages('http', '127.0.0.1');
  foreign = await startPages('http', 'localhost');
  site = h.site.id;
  await h.runtime.services.access.setAllowedOrigins(site, [secure.origin, plain.origin]);
  await newMember(h, site, 'owner@example.com', 'owner');
  await newMember(h, site, 'agent@example.com', 'agent');
  owner = (await signIn(h, 'owner@example.com')).cookie;
  agent = (await signIn(h, 'agent@example.com')).cookie;
  const embed = await request(h.app).get(`${M}/sites/${site}/embed`).set(SAME_ORIGIN).set('Cookie', owner);
  snippetSrc = embed.body.data.scriptUrl;
  secure.on('/', html(embed.body.data.snippet));
  plain.on('/', html(embed.body.data.snippet));
});

afterAll(async () => {
  await Promise.all([h.close(), strict.close(), secure.close(), plain.close(), foreign.close()]);
  fs.rmSync(caDir, { recursive: true, force: true });
});

function check(url: string, opts: { cookie?: string; siteId?: string; app?: Harness['app'] } = {}) {
  return request(opts.app ?? h.app)
    .post(`${M}/sites/${opts.siteId ?? site}/embed/check`)
    .set(SAME_ORIGIN)
    .set('Cookie', opts.cookie ?? owner)
    .send({ url });
}

const codes = (res: request.Response) => (res.body.data.problems as { code: string }[]).map((p) => p.code);

describe('the snippet on a page', () => {
  test('found on an HTTPS page: ok, nothing wrong, and nothing of ours sent', async () => {
    const res = await check(secure.url('/'));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      url: secure.url('/'),
      finalUrl: secure.url('/'),
      status: 200,
      reachable: true,
      found: true,
      ok: true,
      loaderFound: true,
      siteIdMatches: true,
      loaderHostMatches: true,
      loader: { src: snippetSrc, siteId: site },
      redirects: [],
      truncated: false,
      problems: [],
    });
    const [req] = secure.hits('/').slice(-1);
    expect(req.headers['user-agent']).toMatch(/^chat-service-embed-check\/1 \(\+https:\/\/localhost:8443\)$/);
    expect(req.headers.cookie).toBeUndefined();
    expect(req.headers.authorization).toBeUndefined();
  });

  test('found on an HTTP page, through a redirect to another allowed origin', async () => {
    plain.on('/go', redirect(secure.url('/')));
    const res = await check(plain.url('/go'));
    expect(res.body.data).toMatchObject({
      found: true,
      ok: true,
      finalUrl: secure.url('/'),
      redirects: [{ url: plain.url('/go'), status: 302, location: secure.url('/') }],
    });
  });

  test("a relative src counts against the page's <base>, as in browsers", async () => {
    secure.on('/based', html(`<base href="${new URL(snippetSrc).origin}/"><script async src="window/v1/loader.js" data-site="${site}"></script>`));
    expect((await check(secure.url('/based'))).body.data).toMatchObject({ found: true, ok: true, loader: { src: snippetSrc } });
    secure.on('/relative', html(`<script async src="/window/v1/loader.js" data-site="${site}"></script>`));
    const relative = await check(secure.url('/relative'));
    expect(relative.body.data).toMatchObject({ found: false, loaderHostMatches: false, loader: { src: secure.url('/window/v1/loader.js') } });
    expect(codes(relative)).toEqual(['loader_wrong_host']);
  });

  test('absent: loader_missing; a commented-out snippet does not count', async () => {
    secure.on('/absent', html('<p>no chat here</p>'));
    secure.on('/commented', html(`<!-- <script async src="${snippetSrc}" data-site="${site}"></script> -->`));
    for (const p of ['/absent', '/commented']) {
      const res = await check(secure.url(p));
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ reachable: true, found: false, ok: false, loaderFound: false, siteIdMatches: null, loader: null });
      expect(codes(res)).toEqual(['loader_missing']);
    }
  });

  test("another site's id: site_id_mismatch names both ids", async () => {
    const other = 'ws_0000000000000000000000000x';
    secure.on('/other-site', html(`<script async src="${snippetSrc}" data-site="${other}"></script>`));
    const res = await check(secure.url('/other-site'));
    expect(res.body.data).toMatchObject({ found: false, loaderFound: true, siteIdMatches: false, loaderHostMatches: true, loader: { siteId: other } });
    expect(codes(res)).toEqual(['site_id_mismatch']);
    expect(res.body.data.problems[0].message).toContain(other);
    expect(res.body.data.problems[0].message).toContain(site);
  });

  test('another host (an old one): loader_wrong_host; a consent-blocked type: loader_inert', async () => {
    secure.on('/old-host', html(`<script async src="https://old-chat.example/window/v1/loader.js" data-site="${site}"></script>`));
    const old = await check(secure.url('/old-host'));
    expect(old.body.data).toMatchObject({ found: false, siteIdMatches: true, loaderHostMatches: false });
    expect(codes(old)).toEqual(['loader_wrong_host']);
    expect(old.body.data.problems[0].message).toContain(snippetSrc);

    secure.on('/consent', html(`<script type="text/plain" data-consent="chat" src="${snippetSrc}" data-site="${site}"></script>`));
    const inert = await check(secure.url('/consent'));
    expect(inert.body.data).toMatchObject({ found: false, loaderFound: true, siteIdMatches: true, loaderHostMatches: true });
    expect(codes(inert)).toEqual(['loader_inert']);
  });

  test('a Content-Security-Policy that blocks the loader or the panel is named', async () => {
    const snippet = `<script async src="${snippetSrc}" data-site="${site}"></script>`;
    secure.on('/csp-script', html(snippet, { 'Content-Security-Policy': "default-src 'self'; frame-src https://localhost:8443" }));
    const blocked = await check(secure.url('/csp-script'));
    expect(blocked.body.data).toMatchObject({ found: true, ok: false });
    expect(codes(blocked)).toEqual(['csp_blocks_script']);
    expect(blocked.body.data.problems[0].message).toMatch(/default-src does not allow https:\/\/localhost:8443\. Add https:\/\/localhost:8443 to script-src/);

    secure.on('/csp-frame', html(snippet, { 'Content-Security-Policy': "script-src https://localhost:8443; child-src 'none'" }));
    expect(codes(await check(secure.url('/csp-frame')))).toEqual(['csp_blocks_frame']);

    // A <meta> policy counts too; the policy the docs ask for passes.
    secure.on('/csp-meta', html(`<meta http-equiv="Content-Security-Policy" content="script-src 'self'">${snippet}`));
    expect(codes(await check(secure.url('/csp-meta')))).toEqual(['csp_blocks_script']);
    secure.on(
      '/csp-ok',
      html(snippet, { 'Content-Security-Policy': "default-src 'self'; script-src https://localhost:8443; frame-src https://localhost:8443" }),
    );
    expect((await check(secure.url('/csp-ok'))).body.data).toMatchObject({ found: true, ok: true, problems: [] });
  });
});

describe('unreachable pages are a 200 with the reason', () => {
  test('HTTP status, not HTML', async () => {
    const missing = await check(secure.url('/no-such-page'));
    expect(missing.status).toBe(200);
    expect(missing.body.data).toMatchObject({ status: 404, reachable: false, found: false });
    expect(codes(missing)).toEqual(['http_status']);
    secure.on('/json', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
    expect(codes(await check(secure.url('/json')))).toEqual(['not_html']);
  });

  test('a redirect to an origin the site does not allow is not followed', async () => {
    secure.on('/away', redirect(foreign.url('/')));
    const res = await check(secure.url('/away'));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 302, reachable: false, found: false, finalUrl: secure.url('/away') });
    expect(codes(res)).toEqual(['origin_not_allowed']);
    expect(res.body.data.problems[0].message).toContain(foreign.origin);
    expect(foreign.hits('/')).toHaveLength(0);
  });

  test('a redirect loop, and more than 3 redirects', async () => {
    secure.on('/loop-a', redirect('/loop-b', 301));
    secure.on('/loop-b', redirect(secure.url('/loop-a'), 307));
    const loop = await check(secure.url('/loop-a'));
    expect(codes(loop)).toEqual(['redirect_loop']);
    expect(secure.hits('/loop-a')).toHaveLength(1);

    for (const n of [1, 2, 3, 4]) secure.on(`/hop${n}`, redirect(`/hop${n + 1}`));
    secure.on('/hop5', html(`<script async src="${snippetSrc}" data-site="${site}"></script>`));
    const far = await check(secure.url('/hop1'));
    expect(codes(far)).toEqual(['too_many_redirects']);
    expect(far.body.data.redirects).toHaveLength(4);
    expect(secure.hits('/hop5')).toHaveLength(0);
    secure.on('/long', redirect(`/${'a'.repeat(3000)}`));
    const long = await check(secure.url('/long'));
    expect(codes(long)).toEqual(['redirect_invalid']);
    const three = await check(secure.url('/hop2')); // hop2 → 3 → 4 → 5: three redirects are followed
    expect(three.body.data).toMatchObject({ found: true, finalUrl: secure.url('/hop5') });
  });

  test('a page too big: reading stops at 2 MB, and the server saw the download cut', async () => {
    const total = 40 * 1024 * 1024;
    let written = 0;
    let cut = false;
    plain.on('/huge', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      const chunk = Buffer.from(`<p>${'x'.repeat(16 * 1024 - 7)}</p>`);
      const pump = () => {
        while (written < total) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end(`<script async src="${snippetSrc}" data-site="${site}"></script>`);
      };
      res.on('close', () => (cut = written < total));
      pump();
    });
    const res = await check(plain.url('/huge'));
    expect(res.body.data).toMatchObject({ reachable: true, found: false, bytesRead: EMBED_CHECK_LIMITS.maxBytes, truncated: true });
    expect(codes(res)).toEqual(['loader_missing']);
    expect(res.body.data.problems[0].message).toContain('first 2048 KB');
    await waitFor('the server to see the download cut', () => cut);
    expect(written).toBeLessThan(total / 2);
  });

  test('a gzip page is read decoded', async () => {
    const zlib = await import('node:zlib');
    secure.on('/gz', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html', 'Content-Encoding': 'gzip' });
      res.end(zlib.gzipSync(`<html><body><script async src="${snippetSrc}" data-site="${site}"></script></body></html>`));
    });
    expect((await check(secure.url('/gz'))).body.data).toMatchObject({ found: true, ok: true });
  });
});

describe('the fetch stays within its bounds', () => {
  test('private networks are refused when WEBHOOK_ALLOW_PRIVATE_NETWORKS is off, before any connection', async () => {
    const s = await strict.newSite();
    await strict.runtime.services.access.setAllowedOrigins(s.id, [secure.origin, plain.origin]);
    await newMember(strict, s.id, 'strict-owner@example.com', 'owner');
    const cookie = (await signIn(strict, 'strict-owner@example.com')).cookie;
    const before = secure.hits('/').length + plain.hits('/').length;
    for (const url of [secure.url('/'), plain.url('/')]) {
      const res = await check(url, { app: strict.app, siteId: s.id, cookie });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ status: null, reachable: false, found: false });
      expect(codes(res)).toEqual(['blocked_address']);
    }
    expect(secure.hits('/').length + plain.hits('/').length).toBe(before);
  });

  test('a public name that resolves to a private IP is refused too (the resolved IP is what is checked)', async () => {
    const services = strict.runtime.services;
    const s = await strict.newSite();
    await services.access.setAllowedOrigins(s.id, ['https://shop.example']);
    await newMember(strict, s.id, 'dns-owner@example.com', 'owner');
    const checker = createEmbedCheck({
      access: services.access,
      windowUrl: 'https://chat.example.com',
      publicUrl: 'https://chat.example.com',
      allowPrivateNetworks: false,
      resolve: async () => [{ ip: '10.0.0.7', family: 4 }],
    });
    const result = await checker.check(s.id, 'https://shop.example/', async () => undefined);
    expect(result.problems.map((p) => p.code)).toEqual(['blocked_address']);
  });

  test('a slow page ends at the time limit, with what arrived', async () => {
    plain.on('/stall', () => {}); // never answers
    plain.on('/trickle', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.write('<html><body><p>loading');
      const t = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(t));
    });
    const services = h.runtime.services;
    const account = await services.accounts.registry.create('slow-owner@example.com', 'correct horse battery staple');
    await services.accounts.members.add({ manager: null, clientIp: null }, site, account.email, 'owner');
    const checker = createEmbedCheck({
      access: services.access,
      windowUrl: h.config.publicUrl,
      publicUrl: h.config.publicUrl,
      allowPrivateNetworks: true,
      timeoutMs: 400,
    });
    const started = Date.now();
    const stalled = await checker.check(site, plain.url('/stall'), async () => undefined);
    // Liveness, not speed: it ended by its own 0.4 s limit, long before the default 10 s one could end it.
    expect(Date.now() - started).toBeLessThan(EMBED_CHECK_LIMITS.timeoutMs / 2);
    expect(stalled).toMatchObject({ status: null, reachable: false, found: false, bytesRead: 0 });
    expect(stalled.problems.map((p) => [p.code, p.message])).toEqual([['timeout', expect.stringContaining('within 0.4 s')]]);
    const trickle = await checker.check(site, plain.url('/trickle'), async () => undefined);
    expect(trickle).toMatchObject({ status: 200, reachable: false, found: false });
    expect(trickle.bytesRead).toBeGreaterThan(0);
    expect(trickle.problems.map((p) => p.code)).toEqual(['timeout']);
  });

  test('a page whose origin the site does not allow, and bad URLs, are 400', async () => {
    const res = await check(foreign.url('/'));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.message).toContain(`${foreign.origin} is not among the site's allowed origins`);
    expect(foreign.hits('/')).toHaveLength(0);
    for (const url of ['not a url', 'ftp://localhost/', `https://user:pw@${secure.origin.slice('https://'.length)}/`]) {
      const bad = await check(url);
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_request');
    }
  });

  test('owners only: an agent gets 403, another site 404', async () => {
    const asAgent = await check(secure.url('/'), { cookie: agent });
    expect(asAgent.status).toBe(403);
    expect(asAgent.body.error.code).toBe('forbidden');
    const other = await h.newSite();
    const elsewhere = await check(secure.url('/'), { siteId: other.id });
    expect(elsewhere.status).toBe(404);
  });

  test('at most 10 checks a minute per site, then 429 with Retry-After', async () => {
    const s = await h.newSite();
    await h.runtime.services.access.setAllowedOrigins(s.id, [secure.origin]);
    await h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, s.id, 'owner@example.com', 'owner');
    secure.on('/budget', html('<p>x</p>'));
    // A refused URL costs nothing.
    expect((await check(foreign.url('/'), { siteId: s.id })).status).toBe(400);
    for (let i = 0; i < EMBED_CHECK_LIMITS.perSitePerMinute; i++) expect((await check(secure.url('/budget'), { siteId: s.id })).status).toBe(200);
    const before = secure.hits('/budget').length;
    const over = await check(secure.url('/budget'), { siteId: s.id });
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('rate_limit_exceeded');
    expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(secure.hits('/budget')).toHaveLength(before);
    // Another site keeps its own budget.
    expect((await check(secure.url('/'))).status).toBe(200);
  });

  test('at most 30 checks a minute per account, over all its sites', async () => {
    const sites: string[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await h.newSite();
      await h.runtime.services.access.setAllowedOrigins(s.id, [secure.origin]);
      await h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, s.id, 'owner@example.com', 'owner');
      sites.push(s.id);
    }
    secure.on('/many', html('<p>x</p>'));
    for (let i = 0; i < EMBED_CHECK_LIMITS.perAccountPerMinute; i++) {
      expect((await check(secure.url('/many'), { siteId: sites[i % 3] })).status).toBe(200);
    }
    const over = await check(secure.url('/many'), { siteId: sites[3] });
    expect(over.status).toBe(429);
    expect(over.body.error.message).toContain('per account');
    // The refused check did not use the fourth site's budget: another owner of it still has all of it.
    const other = await newMember(h, sites[3], 'second-owner@example.com', 'owner');
    expect(other.id).toBeDefined();
    const cookie = (await signIn(h, 'second-owner@example.com')).cookie;
    for (let i = 0; i < EMBED_CHECK_LIMITS.perSitePerMinute; i++) expect((await check(secure.url('/many'), { siteId: sites[3], cookie })).status).toBe(200);
  });
});
