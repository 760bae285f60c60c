/**
 * The chat window on an origin of its own (WINDOW_PUBLIC_URL), answered by the same process: by
 * Host header, the window's host answers the window and its visitors' file links only, the main
 * host the API, Swagger UI and the rest; file links are signed for one host and open there only.
 * Then in Chromium: a shop embeds the loader from the window's origin, the panel runs there, and
 * the docs' origin (where an operator's key is entered) holds nothing of the visitor's.
 */
import https from 'node:https';
import request from 'supertest';
import type { Browser, Frame, Page } from 'playwright-core';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { describeInChromium, launchChromium } from '../helpers/chromium';
import { freePort } from '../helpers/spawn';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { loadConfig } from '../../server/config';
import { allowOrigins, ARRIVAL_MS, auth, getToken, ORIGIN, w } from '../window/helpers';

const MAIN = 'localhost:8443';
const WINDOW = '127.0.0.1:8443';

describe('WINDOW_PUBLIC_URL: one process, two hosts', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({ env: { PUBLIC_URL: `https://${MAIN}`, WINDOW_PUBLIC_URL: `https://${WINDOW}` } });
    await allowOrigins(h, h.site.id);
  });
  afterAll(() => h?.close());

  const on = (host: string) => ({
    get: (path: string) => request(h.app).get(path).set('Host', host),
    post: (path: string) => request(h.app).post(path).set('Host', host),
  });

  test("the window's host answers the window only: the API, the docs and the rest are 404 there", async () => {
    expect((await on(WINDOW).get('/window/v1/loader.js')).status).toBe(200);
    expect((await on(WINDOW).get(w(h.site.id, '/panel'))).status).toBe(200);
    for (const path of ['/api/v1/conversations', '/api/v1/schemas/message.created.json', '/docs/', '/openapi.json', '/healthz', '/']) {
      const res = await on(WINDOW).get(path).set(bearer(h.site.key));
      expect([path, res.status, res.body.error?.code]).toEqual([path, 404, 'not_found']);
    }
    // The host name decides, whatever the port or the letter case.
    expect((await on('127.0.0.1').get('/api/v1/conversations').set(bearer(h.site.key))).status).toBe(404);
    expect((await on('LOCALHOST:8443').get('/api/v1/conversations').set(bearer(h.site.key))).status).toBe(200);
  });

  test("the main host answers the API and the docs; the window's routes there say where the window is", async () => {
    expect((await on(MAIN).get('/api/v1/conversations').set(bearer(h.site.key))).status).toBe(200);
    expect((await on(MAIN).get('/docs/')).status).toBe(200);
    for (const path of ['/window/v1/loader.js', w(h.site.id, '/panel'), w(h.site.id, '/conversation')]) {
      const res = await on(MAIN).get(path);
      expect([path, res.status, res.body.error?.code]).toEqual([path, 404, 'not_found']);
      expect(res.body.error.message).toContain(`https://${WINDOW}/window/v1/`);
    }
  });

  test("the entry's own origin is the window's: the panel there may name its host page, the main origin may not", async () => {
    const panelToken = await request(h.app).post(w(h.site.id, '/token')).set('Host', WINDOW).set('Origin', `https://${WINDOW}`).send({ hostOrigin: ORIGIN });
    expect(panelToken.status).toBe(201);
    const fromMain = await request(h.app).post(w(h.site.id, '/token')).set('Host', WINDOW).set('Origin', `https://${MAIN}`).send({ hostOrigin: ORIGIN });
    expect(fromMain.status).toBe(401);
    expect(fromMain.body.error.code).toBe('unauthorized');
  });

  test("a visitor's file links point at the window's origin and open there only; the API's at the main host only", async () => {
    const t = await getToken(h.app, h.site.id);
    const sent = await on(WINDOW)
      .post(w(h.site.id, '/messages'))
      .set(auth(t.token))
      .field('content', 'my receipt')
      .field('clientMessageId', `c-${Date.now()}`)
      .attach('file', Buffer.from('%PDF-1.4 receipt'), { filename: 'receipt.pdf', contentType: 'application/pdf' });
    expect(sent.status).toBe(201);
    const windowLink = new URL(sent.body.data.message.attachments[0].url);
    expect(windowLink.origin).toBe(`https://${WINDOW}`);
    const opened = await on(WINDOW).get(windowLink.pathname + windowLink.search);
    expect(opened.status).toBe(200);
    expect(opened.body.toString()).toBe('%PDF-1.4 receipt');
    // The same link on the main host: its signature is the window's, not valid there.
    expect((await on(MAIN).get(windowLink.pathname + windowLink.search)).status).toBe(401);

    // History and the live feed give window links too.
    const conversationId = sent.body.data.conversation.id;
    const history = await on(WINDOW)
      .get(w(h.site.id, `/conversations/${conversationId}/messages`))
      .set(auth(t.token));
    expect(new URL(history.body.data[0].attachments[0].url).origin).toBe(`https://${WINDOW}`);

    const api = await on(MAIN).get(`/api/v1/conversations/${conversationId}/messages`).set(bearer(h.site.key));
    const apiLink = new URL(api.body.data[0].attachments[0].url);
    expect(apiLink.origin).toBe(`https://${MAIN}`);
    expect((await on(MAIN).get(apiLink.pathname + apiLink.search)).status).toBe(200);
    // The events the message emitted are for servers: their links are the API's, like its answers.
    const bodies = await h.runtime.db('events').where({ site_id: h.site.id }).pluck('body');
    const created = bodies.map((b: string) => JSON.parse(b)).find((e) => e.event === 'message.created' && e.data.message.id === sent.body.data.message.id);
    expect(new URL(created.data.message.attachments[0].url).origin).toBe(`https://${MAIN}`);
    const elsewhere = await on(WINDOW).get(apiLink.pathname + apiLink.search);
    expect([elsewhere.status, elsewhere.body.error.code]).toEqual([401, 'unauthorized']);

    // The window's host takes no key for files, and refuses malformed links in the envelope.
    const id = windowLink.pathname.split('/').pop();
    for (const query of [
      '',
      '?expires=1&signature=x',
      `?expires=${windowLink.searchParams.get('expires')}&expires=1&signature=${windowLink.searchParams.get('signature')}`,
    ]) {
      const res = await on(WINDOW).get(`/api/v1/media/${id}${query}`).set(bearer(h.site.key));
      expect([query, res.status, res.body.error?.code]).toEqual([query, 401, 'unauthorized']);
    }
  });

  test('WINDOW_PUBLIC_URL must be an https origin on another host name than PUBLIC_URL', () => {
    const env = (value: string) => () => loadConfig({ PUBLIC_URL: 'https://chat.example.com', WINDOW_PUBLIC_URL: value } as NodeJS.ProcessEnv);
    expect(env('https://chat-window.example.net/')().windowPublicUrl).toBe('https://chat-window.example.net');
    expect(env('https://chat-window.example.net:8443')().windowPublicUrl).toBe('https://chat-window.example.net:8443');
    expect(loadConfig({ PUBLIC_URL: 'https://chat.example.com' } as NodeJS.ProcessEnv).windowPublicUrl).toBeUndefined();
    for (const bad of [
      'http://chat-window.example.net',
      'https://chat.example.com:9443',
      'https://chat-window.example.net/window',
      'https://u:p@chat-window.example.net',
      'chat-window.example.net',
      'https://x.example/?a=1',
    ]) {
      expect(env(bad)).toThrow(/WINDOW_PUBLIC_URL/);
    }
  });
});

describeInChromium('the window on its own origin, in Chromium', () => {
  let h: Harness;
  let service: https.Server;
  let shop: https.Server;
  let browser: Browser;
  let mainOrigin: string;
  let windowOrigin: string;
  let shopOrigin: string;

  beforeAll(async () => {
    const port = await freePort();
    mainOrigin = `https://localhost:${port}`;
    windowOrigin = `https://127.0.0.1:${port}`;
    h = await createHarness({ env: { PUBLIC_URL: mainOrigin, WINDOW_PUBLIC_URL: windowOrigin } });
    const tls = await makeSelfSignedCert(); // names localhost and 127.0.0.1: one certificate for both hosts
    service = https.createServer({ cert: tls.cert, key: tls.key }, h.app);
    await new Promise<void>((resolve) => service.listen(port, '127.0.0.1', resolve));
    const shopPort = await freePort();
    // Same site as the window's origin (127.0.0.1), so the panel has its storage (a cross-site
    // panel without it is test/browser/window.test.ts's matter).
    shopOrigin = `https://127.0.0.1:${shopPort}`;
    await allowOrigins(h, h.site.id, [shopOrigin]);
    shop = https.createServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
      res.setHeader('Content-Security-Policy', `default-src 'none'; script-src ${windowOrigin}; frame-src ${windowOrigin}; base-uri 'none'`);
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.end(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title><script async src="${windowOrigin}/window/v1/loader.js" data-site="${h.site.id}"></script></head><body><h1>Shop</h1></body></html>`,
      );
    });
    await new Promise<void>((resolve) => shop.listen(shopPort, '127.0.0.1', resolve));
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    for (const s of [shop, service]) {
      s?.closeAllConnections();
      await new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()));
    }
    await h?.close();
  });

  async function panelOf(page: Page): Promise<Frame> {
    const panel = (await (await page.locator('#chat-window-root iframe').elementHandle())!.contentFrame())!;
    await panel.locator('#cw-input').waitFor();
    return panel;
  }

  test('the loader from the window origin frames the panel there; messages, files and their links stay there', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const errors: string[] = [];
    context.on('weberror', (e) => errors.push(String(e.error())));
    await context.addInitScript(() => {
      const v = ((window as unknown as { __violations: string[] }).__violations = [] as string[]);
      document.addEventListener('securitypolicyviolation', (e) => v.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const page = await context.newPage();
    await page.goto(`${shopOrigin}/`);
    await page.locator('#chat-window-root button.launcher').click();
    const panel = await panelOf(page);
    expect(new URL(panel.url()).origin).toBe(windowOrigin);

    await panel.locator('#cw-file').setInputFiles({ name: 'receipt.txt', mimeType: 'text/plain', buffer: Buffer.from('order 42') });
    await panel.locator('#cw-input').fill('Here is my receipt');
    await panel.locator('button.send').click();
    const link = panel.locator('.msg.mine:not(.pending) .files a', { hasText: 'receipt.txt' });
    await link.waitFor();
    const href = (await link.getAttribute('href'))!;
    expect(new URL(href).origin).toBe(windowOrigin);
    // The panel's own policy (connect-src 'self') lets it reach the link: it is on its origin.
    expect(await panel.evaluate(async (u) => (await fetch(u)).status, href)).toBe(200);

    const list = await request(h.app).get('/api/v1/conversations').set('Host', new URL(mainOrigin).host).set(bearer(h.site.key)).expect(200);
    await request(h.app)
      .post(`/api/v1/conversations/${list.body.data[0].id}/messages`)
      .set('Host', new URL(mainOrigin).host)
      .set(bearer(h.site.key))
      .send({ content: 'Thanks, received.' })
      .expect(201);
    await panel.locator('.msg.theirs', { hasText: 'Thanks, received.' }).waitFor({ timeout: ARRIVAL_MS });

    // The docs' origin serves no window and holds nothing of the visitor's.
    const docs = await context.newPage();
    await docs.goto(`${mainOrigin}/docs/`);
    await docs.locator('.swagger-ui .info .title').waitFor();
    expect(await docs.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('cw:')))).toEqual([]);
    expect((await docs.goto(`${mainOrigin}/window/v1/loader.js`))!.status()).toBe(404);

    const violations: string[] = [];
    for (const f of page.frames()) violations.push(...(await f.evaluate(() => (window as unknown as { __violations?: string[] }).__violations ?? [])));
    expect(violations).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  }, 90_000);
});
