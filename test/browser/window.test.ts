/**
 * The chat window in a real browser (Debian's Chromium driven by playwright-core). A shop page on
 * a second origin, with a strict CSP (no unsafe-anything, one origin in script-src and frame-src),
 * embeds the window with the one-line snippet; the service is the real app over HTTPS. The visitor
 * chats, an integration answers through the public API, and the window shows it live.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import request from 'supertest';
import axe from 'axe-core';
import type { Browser, BrowserContext, Frame, Page } from 'playwright-core';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { describeInChromium, launchChromium } from '../helpers/chromium';
import { freePort } from '../helpers/spawn';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { allowOrigins, ARRIVAL_MS, auth, getToken, w } from '../window/helpers';
import { identityHash } from '../../server/window/tokens';

const ARTIFACTS = path.resolve(__dirname, '../../test-artifacts');

function listen(server: http.Server | https.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}
function shut(server: http.Server | https.Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

// On the MySQL pass this file is skipped on purpose: the database engine adds nothing to a browser test.
describeInChromium('The chat window in a browser (SQLite pass only)', () => {
  let h: Harness;
  let service: https.Server;
  let shop: https.Server;
  let crossSiteShop: http.Server;
  let serviceOrigin: string;
  let shopOrigin: string;
  let crossSiteOrigin: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let conversationId: string;
  /** Every request the shop's pages made to the panel document or the live stream. */
  const requests: string[] = [];
  /** Uncaught errors in any page or frame of the test's browser contexts. */
  const pageErrors: string[] = [];

  const shopCsp = () => `default-src 'none'; script-src ${serviceOrigin}; frame-src ${serviceOrigin}; base-uri 'none'; form-action 'none'`;

  beforeAll(async () => {
    const servicePort = await freePort();
    serviceOrigin = `https://localhost:${servicePort}`;
    h = await createHarness({ env: { PUBLIC_URL: serviceOrigin } });
    const tls = await makeSelfSignedCert();
    service = https.createServer({ cert: tls.cert, key: tls.key }, h.app);
    await listen(service, servicePort);

    // Two shops. The main one is another origin of the same site as the service (https, another
    // port), where the panel may use its storage; the other is another site (http://localhost is
    // not same-site with https), where the browser's third-party storage blocking applies.
    const shopPort = await freePort();
    const crossPort = await freePort();
    shopOrigin = `https://localhost:${shopPort}`;
    crossSiteOrigin = `http://localhost:${crossPort}`;
    await allowOrigins(h, h.site.id, [shopOrigin, crossSiteOrigin]);
    const snippet = `<script async src="${serviceOrigin}/window/v1/loader.js" data-site="${h.site.id}"></script>`;
    const shopPage: http.RequestListener = (req, res) => {
      const url = new URL(req.url ?? '/', shopOrigin);
      // The CORS probe page may also connect to the service: only CORS stands in the way then.
      const csp = url.pathname === '/probe' ? `${shopCsp()}; connect-src ${serviceOrigin}` : shopCsp();
      res.setHeader('Content-Security-Policy', csp);
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.end(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Shop</title>${snippet}</head>` +
          `<body><main><h1>A shop</h1><p>Products.</p></main></body></html>`,
      );
    };
    shop = https.createServer({ cert: tls.cert, key: tls.key }, shopPage);
    await listen(shop, shopPort);
    crossSiteShop = http.createServer(shopPage);
    await listen(crossSiteShop, crossPort);

    browser = await launchChromium();
    context = await newContext();
    page = await context.newPage();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await shut(shop);
    await shut(crossSiteShop);
    await shut(service);
    await h?.close();
  });

  /** A browser profile: trusts the test certificate, records CSP violations and page errors in every frame. */
  async function newContext(options: Parameters<Browser['newContext']>[0] = {}, on: Browser = browser): Promise<BrowserContext> {
    const ctx = await on.newContext({ ignoreHTTPSErrors: true, ...options });
    await ctx.addInitScript(() => {
      const w = window as unknown as { __violations: string[] };
      w.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => w.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    ctx.on('request', (r) => {
      if (/\/panel$|\/events$/.test(new URL(r.url()).pathname)) requests.push(r.url());
    });
    ctx.on('weberror', (e) => pageErrors.push(String(e.error())));
    return ctx;
  }

  const launcher = (p: Page) => p.locator('#chat-window-root button.launcher');
  async function panelOf(p: Page): Promise<Frame> {
    await p.locator('#chat-window-root iframe').waitFor({ state: 'attached' });
    for (let i = 0; i < 100; i++) {
      const f = p.frames().find((fr) => fr.url().endsWith(`/sites/${h.site.id}/panel`));
      if (f) {
        await f.locator('#cw-input').waitFor();
        return f;
      }
      await p.waitForTimeout(50);
    }
    throw new Error('the panel frame did not appear');
  }
  async function violations(p: Page): Promise<string[]> {
    const all: string[] = [];
    for (const f of p.frames()) all.push(...(await f.evaluate(() => (window as unknown as { __violations?: string[] }).__violations ?? [])));
    return all;
  }
  const api = () => request(h.app);
  /** The live-stream requests a page and its frames make from now on. */
  function streamsOf(p: Page): string[] {
    const seen: string[] = [];
    p.on('request', (r) => {
      if (new URL(r.url()).pathname.endsWith('/events')) seen.push(r.url());
    });
    return seen;
  }
  /** The host page's own code listens through the JS API; `window.__heard` keeps what it heard. */
  const listenToJsApi = (p: Page) =>
    p.evaluate(() => {
      const w = window as unknown as { ChatWindow: { on(e: string, fn: (d: unknown) => void): void }; __heard: unknown[] };
      w.__heard = [];
      for (const name of ['message', 'unread', 'closed']) w.ChatWindow.on(name, (d) => w.__heard.push({ name, d }));
    });

  test('the snippet works under a strict CSP; the panel loads on first interaction only', async () => {
    await page.goto(`${shopOrigin}/`);
    await launcher(page).waitFor();
    expect(await launcher(page).getAttribute('aria-expanded')).toBe('false');
    expect(page.frames()).toHaveLength(1);
    expect(requests.filter((u) => u.endsWith('/panel'))).toEqual([]);

    await launcher(page).click();
    const panel = await panelOf(page);
    expect(await launcher(page).getAttribute('aria-expanded')).toBe('true');
    await panel.locator('#cw-status:empty').waitFor({ state: 'attached' }); // connected
    expect(await violations(page)).toEqual([]);
    // Nothing is stored before the visitor writes.
    expect(await panel.evaluate(() => localStorage.length)).toBe(0);
  });

  test('the visitor sends a message and a file; an API reply appears live', async () => {
    const panel = await panelOf(page);
    await panel.locator('#cw-input').fill('Hello, is the blue one in stock?');
    await panel.locator('#cw-input').press('Enter');
    await panel.locator('.msg.mine:not(.pending)', { hasText: 'blue one' }).waitFor();

    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    expect(list.body.data).toHaveLength(1);
    conversationId = list.body.data[0].id;
    expect(await panel.evaluate((site) => localStorage.getItem(`cw:${site}:visitor`), h.site.id)).toMatch(/^wvc1\./);

    await panel.locator('#cw-file').setInputFiles({ name: 'receipt.txt', mimeType: 'text/plain', buffer: Buffer.from('order 42') });
    await panel.locator('#cw-chosen', { hasText: 'receipt.txt' }).waitFor();
    await panel.locator('#cw-input').fill('Here is my receipt');
    await panel.locator('button.send').click();
    await panel.locator('.msg.mine:not(.pending) .files a', { hasText: 'receipt.txt' }).waitFor();
    const messages = await api().get(`/api/v1/conversations/${conversationId}/messages`).set(bearer(h.site.key)).expect(200);
    expect(messages.body.data.map((m: { content: string }) => m.content)).toEqual(['Hello, is the blue one in stock?', 'Here is my receipt']);
    expect(messages.body.data[1].attachments[0].name).toBe('receipt.txt');

    await api()
      .post(`/api/v1/conversations/${conversationId}/messages`)
      .set(bearer(h.site.key))
      .send({ content: 'Yes, **three** left. See [the page](https://shop.example/blue).', format: 'markdown' })
      .expect(201);
    const reply = panel.locator('.msg.theirs', { hasText: 'left' });
    await reply.waitFor({ timeout: ARRIVAL_MS });
    expect(await reply.locator('strong').innerText()).toBe('three');
    const link = reply.locator('a');
    expect(await link.getAttribute('href')).toBe('https://shop.example/blue');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer nofollow');
    expect(await link.getAttribute('target')).toBe('_blank');
    // Each message once, though both the POST's answer and the stream bring the visitor's own.
    expect(await panel.locator('.msg').count()).toBe(3);
    await page.screenshot({ path: path.join(ARTIFACTS, 'window-open.png') });
  });

  test('a hostile markdown reply renders inert', async () => {
    const panel = await panelOf(page);
    const hostile = [
      '<script>window.__pwned = "script"</script>',
      '<img src=x onerror="window.__pwned = \'img\'">',
      '[click me](javascript:window.__pwned=1) and [data](data:text/html,<b>x</b>) and [tab](java\tscript:alert(1))',
      '<a href="javascript:alert(1)">raw</a> <iframe src="https://evil.example"></iframe>',
    ].join('\n\n');
    await api().post(`/api/v1/conversations/${conversationId}/messages`).set(bearer(h.site.key)).send({ content: hostile, format: 'markdown' }).expect(201);
    const msg = panel.locator('.msg.theirs', { hasText: 'click me' });
    await msg.waitFor();
    expect(await msg.innerText()).toContain('<script>window.__pwned = "script"</script>'); // shown as text
    expect(await msg.locator('script, img, iframe').count()).toBe(0);
    expect(await msg.locator('a').count()).toBe(0);
    expect(await panel.locator('a[href^="javascript:" i], a[href^="data:" i]').count()).toBe(0);
    expect(await panel.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined();
    expect(pageErrors).toEqual([]);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined();
    expect(await violations(page)).toEqual([]);
  });

  test('a reply quoting five levels deep with a line separator in a heading renders, and the window stays live', async () => {
    const panel = await panelOf(page);
    // A parser that takes no line for one of these loops for ever: the window freezes, and again on every reload.
    const content = 'Quoting you:\n\n>>>>> x\n\n> > > > > x\n\n# a\u2028b';
    await api().post(`/api/v1/conversations/${conversationId}/messages`).set(bearer(h.site.key)).send({ content, format: 'markdown' }).expect(201);
    const msg = panel.locator('.msg.theirs', { hasText: 'Quoting you' });
    await msg.waitFor({ timeout: ARRIVAL_MS });
    // Quotes nest four deep; the fifth marker stays text.
    const innermost = msg.locator('blockquote blockquote blockquote blockquote');
    expect(await innermost.allInnerTexts()).toEqual(['> x', '> x']);
    expect(await msg.locator('blockquote blockquote blockquote blockquote blockquote').count()).toBe(0);
    // U+2028 ends the heading's line: the heading holds `a`, the next line is a paragraph.
    expect(await msg.locator('.md-heading').innerText()).toBe('a');
    expect(await msg.locator('.md-heading + p').innerText()).toBe('b');

    await api()
      .post(`/api/v1/conversations/${conversationId}/messages`)
      .set(bearer(h.site.key))
      .send({ content: 'Still *here*', format: 'markdown' })
      .expect(201);
    await panel.locator('.msg.theirs', { hasText: 'Still here' }).waitFor({ timeout: ARRIVAL_MS });
    expect(pageErrors).toEqual([]);
  });

  test('a reload brings the history back; a close through the API shows in the window', async () => {
    await page.reload();
    await launcher(page).click();
    const panel = await panelOf(page);
    await panel.locator('.msg.theirs', { hasText: 'click me' }).waitFor();
    expect(await panel.locator('.msg').allInnerTexts()).toEqual([
      expect.stringContaining('blue one'),
      expect.stringContaining('receipt.txt'),
      expect.stringContaining('three'),
      expect.stringContaining('click me'),
      expect.stringContaining('Quoting you'),
      expect.stringContaining('Still here'),
    ]);

    await api().post(`/api/v1/conversations/${conversationId}/close`).set(bearer(h.site.key)).expect(200);
    await panel.locator('.notice', { hasText: 'next message starts a new one' }).waitFor({ timeout: ARRIVAL_MS });

    await panel.locator('#cw-input').fill('One more question');
    await panel.locator('#cw-input').press('Enter');
    await panel.locator('.msg.mine:not(.pending)', { hasText: 'One more question' }).waitFor();
    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    expect(list.body.data).toHaveLength(2);
  });

  test('the public API refuses the page (no CORS), while the window entry answers it', async () => {
    const probe = await context.newPage();
    await probe.goto(`${shopOrigin}/probe`);
    const outcome = await probe.evaluate(
      async ({ url, key, token }) => {
        const results: string[] = [];
        try {
          await fetch(`${url}/api/v1/conversations`, { headers: { Authorization: `Bearer ${key}` } });
          results.push('api answered');
        } catch (e) {
          results.push(`api ${(e as Error).name}`);
        }
        // The control: the same page, the same connect-src, a CORS-enabled endpoint.
        const res = await fetch(token, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
        results.push(`window ${res.status}`);
        return results;
      },
      { url: serviceOrigin, key: h.site.key, token: `${serviceOrigin}/window/v1/sites/${h.site.id}/token` },
    );
    expect(outcome).toEqual(['api TypeError', 'window 201']);
    await probe.close();
  });

  test('keyboard only, on another site with third-party storage blocked: Tab, Enter opens, Enter sends, Esc closes, focus returns', async () => {
    const ctx = await newContext();
    const p = await ctx.newPage();
    try {
      await p.goto(`${crossSiteOrigin}/`);
      await launcher(p).waitFor();
      await p.keyboard.press('Tab');
      expect(await p.evaluate(() => document.activeElement?.shadowRoot?.activeElement?.className)).toBe('launcher');
      await p.keyboard.press('Enter');
      const panel = await panelOf(p);
      await panel.waitForFunction(() => document.activeElement?.id === 'cw-input', undefined, { polling: 50 });
      await p.keyboard.type('Typed with the keyboard');
      await p.keyboard.press('Enter');
      await panel.locator('.msg.mine:not(.pending)', { hasText: 'Typed with the keyboard' }).waitFor();
      // The browser refuses the framed panel its storage here; the window works from memory.
      expect(
        await panel.evaluate(() => {
          try {
            return typeof localStorage.length;
          } catch (e) {
            return (e as Error).name;
          }
        }),
      ).toBe('SecurityError');
      await p.keyboard.press('Escape');
      await p.locator('#chat-window-root iframe').waitFor({ state: 'hidden' });
      expect(await p.evaluate(() => document.activeElement?.shadowRoot?.activeElement?.className)).toBe('launcher');
      expect(await launcher(p).getAttribute('aria-expanded')).toBe('false');
    } finally {
      await ctx.close();
    }
  });

  test('away: with no one at the inbox the window says so and takes an email for the replies, checked first in the browser', async () => {
    await launcher(page).waitFor();
    if ((await launcher(page).getAttribute('aria-expanded')) !== 'true') await launcher(page).click();
    const panel = await panelOf(page);
    await panel.locator('#cw-away:not([hidden])').waitFor({ timeout: ARRIVAL_MS });
    expect(await panel.locator('#cw-away-title').innerText()).toBe('No one is online right now.');
    await panel.locator('#cw-away-email').fill('not an email');
    await panel.locator('#cw-away-form button').click();
    await panel.locator('#cw-away-status', { hasText: 'valid email' }).waitFor();
    await panel.locator('#cw-away-email').fill('shopper@example.test');
    await panel.locator('#cw-away-form button').click();
    await panel.locator('#cw-away-status', { hasText: 'tick the box' }).waitFor();
    await panel.locator('#cw-away-consent').check();
    await panel.locator('#cw-away-form button').click();
    await panel.locator('#cw-away-status', { hasText: 'Thank you' }).waitFor();
    expect(await panel.locator('#cw-away-form').isHidden()).toBe(true);
    const [visitor] = await h.runtime.db('visitors').where({ site_id: h.site.id, email: 'shopper@example.test' });
    expect(Boolean(visitor.email_verified)).toBe(false);
    expect(visitor.reply_email_at).not.toBeNull();
  });

  test('axe-core finds no serious or critical violation in the launcher or the open window', async () => {
    await launcher(page).waitFor();
    if ((await launcher(page).getAttribute('aria-expanded')) !== 'true') await launcher(page).click();
    const panel = await panelOf(page);
    const serious: string[] = [];
    for (const frame of [page.mainFrame(), panel]) {
      // evaluate runs through the DevTools protocol: the pages' CSP does not apply to it.
      await frame.evaluate(axe.source);
      const result = await frame.evaluate(async () => {
        const r = await (window as unknown as { axe: typeof axe }).axe.run(document, { resultTypes: ['violations'] });
        return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) }));
      });
      for (const v of result) if (v.impact === 'serious' || v.impact === 'critical') serious.push(`${frame.url()}: ${v.id} ${JSON.stringify(v.nodes)}`);
    }
    expect(serious).toEqual([]);
  });

  test('on a phone the window is full screen with 16 px inputs', async () => {
    const ctx = await newContext({ viewport: { width: 375, height: 700 }, isMobile: true, hasTouch: true });
    const p = await ctx.newPage();
    try {
      await p.goto(`${shopOrigin}/`);
      await launcher(p).click();
      const panel = await panelOf(p);
      const box = await p.locator('#chat-window-root iframe').boundingBox();
      expect(box).toEqual({ x: 0, y: 0, width: 375, height: 700 });
      expect(await panel.locator('#cw-input').evaluate((el) => getComputedStyle(el).fontSize)).toBe('16px');
      await p.screenshot({ path: path.join(ARTIFACTS, 'window-phone.png') });
    } finally {
      await ctx.close();
    }
  });

  test('several tabs share one live connection; another takes over when it closes; the JS API reports replies and unread', async () => {
    // The main tab's visitor's open conversation (the keyboard test's visitor has one too).
    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    let current = '';
    for (const c of list.body.data as { id: string; state: string }[]) {
      const m = await api().get(`/api/v1/conversations/${c.id}/messages`).set(bearer(h.site.key)).expect(200);
      if (c.state === 'open' && m.body.data.some((x: { content: string }) => x.content === 'One more question')) current = c.id;
    }
    expect(current).not.toBe('');
    const reply = (content: string) => api().post(`/api/v1/conversations/${current}/messages`).set(bearer(h.site.key)).send({ content }).expect(201);

    const first = await panelOf(page);
    await first.waitForFunction(() => document.documentElement.dataset.leader === 'true', undefined, { polling: 50 });
    const second = await context.newPage();
    const secondStreams = streamsOf(second);
    await second.goto(`${shopOrigin}/`);
    await listenToJsApi(second);
    await launcher(second).click();
    const secondPanel = await panelOf(second);
    await secondPanel.locator('.msg', { hasText: 'One more question' }).waitFor(); // the same visitor: its history
    await second.evaluate(() => (window as unknown as { ChatWindow: { close(): void } }).ChatWindow.close());

    await reply('Reaches every tab');
    await first.locator('.msg.theirs', { hasText: 'Reaches every tab' }).waitFor({ timeout: ARRIVAL_MS });
    // The second tab's window is closed (hidden): the message is there all the same.
    await secondPanel.locator('.msg.theirs', { hasText: 'Reaches every tab' }).waitFor({ state: 'attached', timeout: ARRIVAL_MS });
    expect(secondStreams).toEqual([]); // it heard the leader tab, with no stream of its own
    expect(await secondPanel.evaluate(() => document.documentElement.dataset.leader)).toBeUndefined();
    // The host page hears it after the panel shows it (a message across frames): waited for, not read at once.
    await second.waitForFunction(() => (window as unknown as { __heard: { name: string }[] }).__heard.some((e) => e.name === 'unread'), undefined, {
      polling: 50,
    });
    expect(await launcher(second).locator('.badge').innerText()).toBe('1');
    expect(await launcher(second).getAttribute('aria-label')).toBe('Open chat, 1 unread message');
    expect(await second.evaluate(() => (window as unknown as { __heard: unknown[] }).__heard)).toEqual([
      { name: 'message', d: expect.objectContaining({ direction: 'outgoing', content: 'Reaches every tab' }) },
      { name: 'unread', d: { count: 1 } },
    ]);

    await page.close();
    // Polled on a timer: the second tab's window is hidden, where requestAnimationFrame (the default) never fires.
    await secondPanel.waitForFunction(() => document.documentElement.dataset.leader === 'true', undefined, { polling: 50, timeout: ARRIVAL_MS });
    await reply('After the first tab left');
    await secondPanel.locator('.msg.theirs', { hasText: 'After the first tab left' }).waitFor({ state: 'attached', timeout: ARRIVAL_MS });
    expect(secondStreams.length).toBeGreaterThanOrEqual(1);
    await second.close();
    expect(pageErrors).toEqual([]);
  });

  test('identify(): a verified user gets the same conversation on another device', async () => {
    const { identitySecret } = await h.runtime.services.access.setIdentity(h.site.id, { mode: 'optional', rotateSecret: true });
    const userHash = identityHash(identitySecret!, 'customer-42');
    const device = async () => {
      const ctx = await newContext();
      const p = await ctx.newPage();
      await p.goto(`${shopOrigin}/`);
      await launcher(p).waitFor();
      await p.evaluate(
        (hash) => (window as unknown as { ChatWindow: { identify(i: object): void } }).ChatWindow.identify({ userId: 'customer-42', userHash: hash }),
        userHash,
      );
      await launcher(p).click();
      return { ctx, panel: await panelOf(p) };
    };
    const phone = await device();
    try {
      await phone.panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
      await phone.panel.locator('#cw-input').fill('Signed in on my phone');
      await phone.panel.locator('#cw-input').press('Enter');
      await phone.panel.locator('.msg.mine:not(.pending)', { hasText: 'Signed in on my phone' }).waitFor();
    } finally {
      await phone.ctx.close();
    }
    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    expect(list.body.data.filter((c: { visitorId: string }) => c.visitorId === 'user:customer-42')).toHaveLength(1);

    const laptop = await device();
    try {
      await laptop.panel.locator('.msg.mine', { hasText: 'Signed in on my phone' }).waitFor();
    } finally {
      await laptop.ctx.close();
    }
    expect(pageErrors).toEqual([]);
  });

  test('a send whose answer is lost is retried with the same clientMessageId and posts once', async () => {
    const ctx = await newContext();
    const p = await ctx.newPage();
    let cut = 0;
    // The first send reaches the service, but its answer never reaches the window.
    await ctx.route('**/window/v1/sites/*/messages', async (route) => {
      if (route.request().method() !== 'POST' || cut > 0) return route.continue();
      cut++;
      await route.fetch();
      await route.abort('connectionreset');
    });
    try {
      await p.goto(`${shopOrigin}/`);
      await launcher(p).click();
      const panel = await panelOf(p);
      await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
      await panel.locator('#cw-input').fill('Did this arrive?');
      await panel.locator('#cw-input').press('Enter');
      const retry = panel.locator('.msg.failed button.retry');
      await retry.waitFor();
      expect(await panel.locator('.msg.failed').innerText()).toContain('Not sent');
      await retry.click();
      // The stream may show the stored message before the retry's answer; once that answer is in, one bubble is left.
      await panel.locator('.msg.pending, .msg.failed').first().waitFor({ state: 'detached' });
      expect(await panel.locator('.msg', { hasText: 'Did this arrive?' }).count()).toBe(1);
    } finally {
      await ctx.close();
    }
    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    let copies = 0;
    for (const c of list.body.data as { id: string }[]) {
      const m = await api().get(`/api/v1/conversations/${c.id}/messages`).set(bearer(h.site.key)).expect(200);
      copies += m.body.data.filter((x: { content: string }) => x.content === 'Did this arrive?').length;
    }
    expect(cut).toBe(1);
    expect(copies).toBe(1);
  });

  describe("live updates whether the panel's storage is refused, partitioned or half broken", () => {
    /** What the framed panel may use: localStorage and a Web Lock, or the browser's refusal of each. */
    const storageOf = (panel: Frame) =>
      panel.evaluate(async () => {
        const name = (e: unknown) => (e as Error).name;
        let storage = 'usable';
        let lock = 'granted';
        try {
          localStorage.getItem('cw:probe');
        } catch (e) {
          storage = name(e);
        }
        try {
          await navigator.locks.request('cw:probe', { ifAvailable: true }, () => undefined);
        } catch (e) {
          lock = name(e);
        }
        return { storage, lock };
      });

    /**
     * A visitor on a shop page (by default the cross-site one) writes; then an API reply, a reply
     * while the window is closed and the close must each reach the window and the host page's JS
     * API as they happen.
     */
    async function hearsEverythingLive(ctx: BrowserContext, label: string, storage: { storage: string; lock: string }, origin = crossSiteOrigin) {
      const p = await ctx.newPage();
      const streams = streamsOf(p);
      await p.goto(`${origin}/`);
      await launcher(p).waitFor();
      await listenToJsApi(p);
      await launcher(p).click();
      const panel = await panelOf(p);
      expect(await storageOf(panel)).toEqual(storage);
      await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
      const question = `Asked from another site (${label})`;
      await panel.locator('#cw-input').fill(question);
      await panel.locator('#cw-input').press('Enter');
      await panel.locator('.msg.mine:not(.pending)', { hasText: question }).waitFor();

      let id = '';
      const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
      for (const c of list.body.data as { id: string }[]) {
        const m = await api().get(`/api/v1/conversations/${c.id}/messages`).set(bearer(h.site.key)).expect(200);
        if (m.body.data.some((x: { content: string }) => x.content === question)) id = c.id;
      }
      expect(id).not.toBe('');
      const reply = (content: string) => api().post(`/api/v1/conversations/${id}/messages`).set(bearer(h.site.key)).send({ content }).expect(201);

      await reply(`Answered live (${label})`);
      await panel.locator('.msg.theirs', { hasText: `Answered live (${label})` }).waitFor({ timeout: ARRIVAL_MS });
      await p.evaluate(() => (window as unknown as { ChatWindow: { close(): void } }).ChatWindow.close());
      await reply(`Answered while closed (${label})`);
      await panel.locator('.msg.theirs', { hasText: `Answered while closed (${label})` }).waitFor({ state: 'attached', timeout: ARRIVAL_MS });
      // The host page hears it after the panel shows it (a message across frames, here across processes).
      await launcher(p).locator('.badge', { hasText: /^1$/ }).waitFor();
      await api().post(`/api/v1/conversations/${id}/close`).set(bearer(h.site.key)).expect(200);
      await panel.locator('.notice', { hasText: 'next message starts a new one' }).waitFor({ state: 'attached', timeout: ARRIVAL_MS });

      await p.waitForFunction(() => (window as unknown as { __heard: { name: string }[] }).__heard.some((e) => e.name === 'closed'), undefined, {
        polling: 50,
      });
      // The visitor's own message may come back as an event too (the stream can beat the POST's answer).
      const heard = (await p.evaluate(() => (window as unknown as { __heard: { name: string; d: { direction?: string } }[] }).__heard)).filter(
        (e) => !(e.name === 'message' && e.d.direction === 'incoming'),
      );
      expect(heard).toEqual([
        { name: 'message', d: expect.objectContaining({ conversationId: id, direction: 'outgoing', content: `Answered live (${label})` }) },
        { name: 'message', d: expect.objectContaining({ conversationId: id, direction: 'outgoing', content: `Answered while closed (${label})` }) },
        { name: 'unread', d: { count: 1 } },
        { name: 'closed', d: { id, state: 'closed' } },
      ]);
      expect(streams.length).toBeGreaterThanOrEqual(1);
      expect(await violations(p)).toEqual([]);
      await p.close();
    }

    test('storage refused (playwright-core turns partitioning off; third-party storage is blocked): the window keeps a stream of its own', async () => {
      const ctx = await newContext();
      try {
        await hearsEverythingLive(ctx, 'storage refused', { storage: 'SecurityError', lock: 'SecurityError' });
      } finally {
        await ctx.close();
      }
      expect(pageErrors).toEqual([]);
    });

    test("Chromium's own defaults (third-party storage partitioned): the window holds the lock and hears everything", async () => {
      // playwright-core's default --disable-features switch lists ThirdPartyStoragePartitioning:
      // dropped here and given again without it, so partitioning is the one difference.
      const dir = path.dirname(require.resolve('playwright-core/package.json'));
      const { chromiumSwitches } = require(path.join(dir, 'lib/server/chromium/chromiumSwitches.js')) as { chromiumSwitches: () => string[] };
      const disabled = chromiumSwitches().find((s) => s.startsWith('--disable-features=') && s.includes('ThirdPartyStoragePartitioning'));
      if (!disabled) throw new Error("playwright-core no longer disables ThirdPartyStoragePartitioning: check this test's premise");
      const partitioning = disabled.replace(/ThirdPartyStoragePartitioning,?/, '').replace(/,$/, '');
      const own = await launchChromium({ args: [partitioning], ignoreDefaultArgs: [disabled] });
      try {
        const ctx = await newContext({}, own);
        await hearsEverythingLive(ctx, 'storage partitioned', { storage: 'usable', lock: 'granted' });
      } finally {
        await own.close();
      }
      expect(pageErrors).toEqual([]);
    });

    test('a lock manager that throws, or a BroadcastChannel that throws: a stream of its own', async () => {
      for (const [what, lock] of [
        ['locks', 'SecurityError'],
        ['channel', 'granted'],
      ] as const) {
        const ctx = await newContext();
        try {
          // An init script, so it runs in the panel's frame before the panel's code.
          await ctx.addInitScript((broken) => {
            const refuse = () => {
              throw new DOMException('refused', 'SecurityError');
            };
            if (broken === 'locks') Object.defineProperty(Navigator.prototype, 'locks', { get: refuse });
            else Object.defineProperty(window, 'BroadcastChannel', { value: refuse });
          }, what);
          await hearsEverythingLive(ctx, `broken ${what}`, { storage: 'usable', lock }, shopOrigin);
        } finally {
          await ctx.close();
        }
      }
      expect(pageErrors).toEqual([]);
    });
  });

  test("a refused send shows the service's reason on the bubble: too large, no room, a type not allowed", async () => {
    const ctx = await newContext();
    const p = await ctx.newPage();
    const envelope = (status: number, code: string, message: string) => ({
      status,
      contentType: 'application/json',
      body: JSON.stringify({ error: { code, message } }),
    });
    try {
      await p.goto(`${shopOrigin}/`);
      await launcher(p).click();
      const panel = await panelOf(p);
      await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
      const sendFile = async (file: string | { name: string; mimeType: string; buffer: Buffer }) => {
        const name = typeof file === 'string' ? path.basename(file) : file.name;
        await panel.locator('#cw-file').setInputFiles(file);
        await panel.locator('#cw-input').fill(`Here is ${name}`);
        await panel.locator('button.send').click();
        const failed = panel.locator('.msg.failed', { hasText: name });
        await failed.locator('.state', { hasNotText: 'Sending' }).waitFor();
        return { text: await failed.locator('.state').innerText(), retry: await failed.locator('button.retry').count() };
      };

      // The real service: a file one byte over the limit (sparse on disk, handed to the browser by path).
      const big = path.join(fs.mkdtempSync(path.join(h.database.dataDir, 'big-')), 'too-big.bin');
      fs.writeFileSync(big, '');
      fs.truncateSync(big, h.config.maxAttachmentBytes + 1);
      const said = await request(h.app)
        .post(w(h.site.id, '/messages'))
        .set(auth((await getToken(h.app, h.site.id, {}, shopOrigin)).token))
        .field('clientMessageId', crypto.randomUUID())
        .attach('file', big);
      expect(said.status).toBe(413);
      expect(await sendFile(big)).toEqual({ text: `Not sent: ${said.body.error.message}`, retry: 0 });

      // The quota checks' answers, and a proxy's page in front of the service.
      const refusals = [
        [envelope(507, 'storage_quota_exceeded', 'This site has no room left for visitor files today.'), 'This site has no room left for visitor files today.'],
        [
          envelope(415, 'file_type_not_allowed', 'Files of type application/octet-stream cannot be sent here.'),
          'Files of type application/octet-stream cannot be sent here.',
        ],
        [{ status: 413, contentType: 'text/html', body: '<html><body>413 Request Entity Too Large</body></html>' }, 'The message or its files are too large.'],
        [{ status: 507, contentType: 'text/html', body: '<html><body>507</body></html>' }, 'The chat service has no room for files right now.'],
      ] as const;
      let next = 0;
      await ctx.route('**/window/v1/sites/*/messages', (route) => route.fulfill(refusals[next++][0]));
      for (const [, shown] of refusals) {
        expect(await sendFile({ name: `refused-${next}.bin`, mimeType: 'application/octet-stream', buffer: Buffer.from('x') })).toEqual({
          text: `Not sent: ${shown}`,
          retry: 0,
        });
      }
    } finally {
      await ctx.close();
    }
    expect(pageErrors).toEqual([]);
  });

  /** The conversation (id and visitor) that holds a message with this content. */
  async function conversationWith(content: string): Promise<{ id: string; visitorId: string }> {
    const list = await api().get('/api/v1/conversations').set(bearer(h.site.key)).expect(200);
    for (const c of list.body.data as { id: string; visitorId: string }[]) {
      const m = await api().get(`/api/v1/conversations/${c.id}/messages`).set(bearer(h.site.key)).expect(200);
      if (m.body.data.some((x: { content: string }) => x.content === content)) return c;
    }
    throw new Error(`no conversation holds "${content}"`);
  }
  /** A visitor's window on the shop, connected, after sending `text`. */
  async function chatting(ctx: BrowserContext, text: string, identify?: { userId: string; userHash: string }) {
    const p = await ctx.newPage();
    await p.goto(`${shopOrigin}/`);
    await launcher(p).waitFor();
    if (identify) await p.evaluate((i) => (window as unknown as { ChatWindow: { identify(i: object): void } }).ChatWindow.identify(i), identify);
    await launcher(p).click();
    const panel = await panelOf(p);
    await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
    await panel.locator('#cw-input').fill(text);
    await panel.locator('#cw-input').press('Enter');
    await panel.locator('.msg.mine:not(.pending)', { hasText: text }).waitFor();
    return panel;
  }

  test('a revoked anonymous visitor: the window starts over as a new visitor, without the old history', async () => {
    const ctx = await newContext();
    const refusedPositions: string[] = [];
    ctx.on('response', (r) => {
      if (new URL(r.url()).pathname.endsWith('/events') && r.status() === 400) refusedPositions.push(r.url());
    });
    try {
      const panel = await chatting(ctx, 'Before the revocation');
      const before = await conversationWith('Before the revocation');
      await h.runtime.services.access.revokeVisitors(h.site.id, before.visitorId);
      // The service ends the stream at its next heartbeat (15 s); ending every stream now brings the
      // same without the wait: the window reconnects with its revoked token and is refused (401).
      h.runtime.services.window.streams.closeAll();
      await panel.locator('.msg', { hasText: 'Before the revocation' }).waitFor({ state: 'detached', timeout: 10_000 });
      await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });

      await panel.locator('#cw-input').fill('After the revocation');
      await panel.locator('#cw-input').press('Enter');
      await panel.locator('.msg.mine:not(.pending)', { hasText: 'After the revocation' }).waitFor();
      const after = await conversationWith('After the revocation');
      expect(after.visitorId).toMatch(/^vis_/);
      expect(after.visitorId).not.toBe(before.visitorId);
      expect(after.id).not.toBe(before.id);
      // The live connection follows the new visitor.
      await api().post(`/api/v1/conversations/${after.id}/messages`).set(bearer(h.site.key)).send({ content: 'Answered the new visitor' }).expect(201);
      await panel.locator('.msg.theirs', { hasText: 'Answered the new visitor' }).waitFor({ timeout: ARRIVAL_MS });
      expect(await panel.locator('.msg').allInnerTexts()).toEqual([
        expect.stringContaining('After the revocation'),
        expect.stringContaining('Answered the new visitor'),
      ]);
      // The new session resumed from its own history, not from the old visitor's position.
      expect(refusedPositions).toEqual([]);
    } finally {
      await ctx.close();
    }
    expect(pageErrors).toEqual([]);
  });

  test('a revoked visitor with two tabs open: both start over as the same new visitor', async () => {
    const ctx = await newContext();
    try {
      const first = await chatting(ctx, 'Two tabs before the revocation');
      const p2 = await ctx.newPage();
      await p2.goto(`${shopOrigin}/`);
      await launcher(p2).click();
      const second = await panelOf(p2);
      await second.locator('.msg', { hasText: 'Two tabs before the revocation' }).waitFor();
      const before = await conversationWith('Two tabs before the revocation');
      await h.runtime.services.access.revokeVisitors(h.site.id, before.visitorId);
      h.runtime.services.window.streams.closeAll();
      for (const panel of [first, second])
        await panel.locator('.msg', { hasText: 'Two tabs before the revocation' }).waitFor({ state: 'detached', timeout: 10_000 });
      await first.locator('#cw-status:empty').waitFor({ state: 'attached' });
      await first.locator('#cw-input').fill('First tab, new visitor');
      await first.locator('#cw-input').press('Enter');
      await first.locator('.msg.mine:not(.pending)', { hasText: 'First tab, new visitor' }).waitFor();
      // The second tab shows it too: it follows the same new visitor, not a third one.
      await second.locator('.msg', { hasText: 'First tab, new visitor' }).waitFor({ state: 'attached', timeout: ARRIVAL_MS });
      expect((await conversationWith('First tab, new visitor')).visitorId).not.toBe(before.visitorId);
    } finally {
      await ctx.close();
    }
    expect(pageErrors).toEqual([]);
  });

  test('a verified visitor whose site rotated its identity secret: the window says the session ended and stops asking', async () => {
    const { identitySecret } = await h.runtime.services.access.setIdentity(h.site.id, { mode: 'optional', rotateSecret: true });
    const ctx = await newContext();
    const asked: number[] = [];
    ctx.on('request', (r) => {
      if (/\/token(\/refresh)?$|\/events$/.test(new URL(r.url()).pathname)) asked.push(Date.now());
    });
    // What the service writes on an open stream once its token may no longer be used.
    let expired = false;
    await ctx.route('**/window/v1/sites/*/events', (route) =>
      expired ? route.fulfill({ status: 200, contentType: 'text/event-stream', body: 'retry: 2000\n\nevent: token-expired\ndata: {}\n\n' }) : route.continue(),
    );
    try {
      const panel = await chatting(ctx, 'Signed in before the rotation', { userId: 'customer-7', userHash: identityHash(identitySecret!, 'customer-7') });
      await h.runtime.services.access.setIdentity(h.site.id, { rotateSecret: true });
      expired = true;
      const since = asked.length;
      h.runtime.services.window.streams.closeAll();
      await panel.locator('#cw-status', { hasText: 'This chat session has ended. Reload the page to start again.' }).waitFor({ timeout: 10_000 });
      const atEnd = asked.length;
      await panel.waitForTimeout(3000);
      // A refresh, the gateway's refusal and the reconnection that heard token-expired: then nothing.
      expect(atEnd - since).toBeLessThanOrEqual(3);
      expect(asked.length).toBe(atEnd);
      expect(await panel.locator('.msg').count()).toBe(0);
      expect(await panel.locator('#cw-input').isDisabled()).toBe(true);
      expect(await violations(panel.page())).toEqual([]);
    } finally {
      await ctx.close();
    }
    expect(pageErrors).toEqual([]);
  });
});
