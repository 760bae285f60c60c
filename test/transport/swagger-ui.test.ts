/**
 * Swagger UI (swagger-ui-express) at /docs/: the page runs under a policy without inline scripts,
 * only the files it loads are served, and in a real browser (Debian's Chromium driven by
 * playwright-core) a developer authorizes with a key, "Try it out" on GET /conversations answers
 * 200 from the server, and the key is gone after a reload (kept only with DOCS_PERSIST_AUTHORIZATION).
 */
import request from 'supertest';
import type { Browser } from 'playwright-core';
import { createHarness, Harness, listenHttps } from '../helpers/harness';
import { describeInChromium, launchChromium } from '../helpers/chromium';

describe('the docs page as served', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  test('no inline script: the page loads its settings from swagger-ui-init.js under a script-src of this origin', async () => {
    const page = await request(h.app).get('/docs/');
    expect(page.status).toBe(200);
    const csp = page.headers['content-security-policy'];
    expect(csp).toMatch(/(^|; )script-src 'self'(;|$)/);
    expect(csp).toMatch(/(^|; )connect-src 'self'(;|$)/);
    expect(csp).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
    const scripts = [...page.text.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map(([, attributes]) => attributes.match(/src="([^"]+)"/)?.[1])).toEqual([
      './swagger-ui-bundle.js',
      './swagger-ui-standalone-preset.js',
      './swagger-ui-init.js',
    ]);
    expect(scripts.every(([, , body]) => body.trim() === '')).toBe(true);

    const init = await request(h.app).get('/docs/swagger-ui-init.js');
    expect(init.status).toBe(200);
    expect(init.headers['content-type']).toMatch(/^application\/javascript/);
    expect(init.text).toContain('"swaggerUrl": "/openapi.json"');
    for (const setting of ['"persistAuthorization": false', '"tryItOutEnabled": true', '"displayRequestDuration": true', '"validatorUrl": null']) {
      expect(init.text).toContain(setting);
    }
    // Every file the page links is served.
    for (const link of [...page.text.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((m) => m[1])) {
      expect([link, (await request(h.app).get(`/docs/${link}`)).status]).toEqual([link, 200]);
    }
  });

  test('the management API is listed beside the public API, its document at /manage/openapi.json and .yaml', async () => {
    const init = await request(h.app).get('/docs/swagger-ui-init.js');
    const urls = JSON.parse(/"urls": (\[[\s\S]*?\])/.exec(init.text)![1]) as { url: string; name: string }[];
    expect(urls.map((u) => u.url)).toEqual(['/openapi.json', '/manage/openapi.json']);
    const json = await request(h.app).get('/manage/openapi.json');
    expect(json.status).toBe(200);
    expect(json.body.info.title).toBe('Website Chat management API');
    expect(json.body.servers[0].url).toBe('/manage/v1');
    expect(Object.keys(json.body.paths)).toContain('/sites/{siteId}/keys');
    const yaml = await request(h.app).get('/manage/openapi.yaml');
    expect(yaml.status).toBe(200);
    expect(yaml.headers['content-type']).toMatch(/^application\/yaml/);
    expect(yaml.text).toMatch(/^openapi: 3\.1\.0/);
  });

  test("swagger-ui-dist's own pages and scripts are not served: 404 in the envelope", async () => {
    for (const file of [
      'index.html',
      'swagger-initializer.js',
      'oauth2-redirect.html',
      'oauth2-redirect.js',
      'swagger-ui-es-bundle.js',
      'swagger-ui-bundle.js.map',
      'package.json',
      'index.css',
      'README.md',
    ]) {
      const res = await request(h.app).get(`/docs/${file}`);
      expect([file, res.status, res.body.error?.code]).toEqual([file, 404, 'not_found']);
    }
  });

  test('DOCS_PERSIST_AUTHORIZATION=true keeps the key across reloads (opt-in)', async () => {
    const kept = await createHarness({ env: { DOCS_PERSIST_AUTHORIZATION: 'true' } });
    try {
      expect((await request(kept.app).get('/docs/swagger-ui-init.js')).text).toContain('"persistAuthorization": true');
    } finally {
      await kept.close();
    }
  });

  test('/docs redirects to /docs/ (the page links its files relatively); an unknown file is a 404 in the envelope', async () => {
    const bare = await request(h.app).get('/docs');
    expect(bare.status).toBe(301);
    expect(bare.headers.location).toBe('/docs/');
    const missing = await request(h.app).get('/docs/no-such-file.js');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
  });
});

describeInChromium('Swagger UI', () => {
  let h: Harness;
  let server: Awaited<ReturnType<typeof listenHttps>>;
  let browser: Browser;
  let convId: string;

  beforeAll(async () => {
    h = await createHarness();
    convId = (await h.visitorSay(h.site.id, 'v-swagger', 'Hello from the browser test')).conversation.id;
    server = await listenHttps(h.app);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await h?.close();
  });

  test('Authorize with a key, then Try it out on GET /conversations answers 200; the key is not kept', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true }); // the test server's self-signed certificate
    const page = await context.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) failures.push(m.text()); // anything the policy blocked
    });
    await page.goto(`${server.url}/docs/`);
    await page.locator('.swagger-ui .info .title').waitFor();
    expect(await page.locator('.swagger-ui .info .title').innerText()).toContain('Website Chat API');

    await page.locator('button.authorize').first().click();
    await page.locator('.auth-container input[type=text], .auth-container input[type=password]').first().fill(h.site.key);
    await page.locator('.auth-btn-wrapper button.authorize').first().click();
    await page.locator('.auth-btn-wrapper button.btn-done').first().click();

    /** Opens GET /conversations, presses Execute (tryItOutEnabled: the form is already editable), returns the answer. */
    const tryListConversations = async () => {
      const op = page.locator('#operations-Conversations-listConversations');
      await op.locator('.opblock-summary').click();
      await op.locator('button.execute').click();
      const status = op.locator('.live-responses-table .response .response-col_status').first();
      await status.waitFor({ timeout: 15_000 });
      return { status: (await status.innerText()).trim(), body: await op.locator('.live-responses-table .microlight').first().innerText() };
    };
    const answer = await tryListConversations();
    expect(answer.status).toBe('200');
    expect(answer.body).toContain(convId);

    // The key is not written to the origin's storage: opened again, the page no longer has it.
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage }))).not.toContain(h.site.key);
    await page.goto(`${server.url}/docs/`); // not reload(): deepLinking put the open operation in the URL
    await page.locator('.swagger-ui .info .title').waitFor();
    expect(await page.locator('.swagger-ui button.authorize').count()).toBeGreaterThan(0);
    expect(await page.locator('.swagger-ui button.authorize.locked').count()).toBe(0);
    expect((await tryListConversations()).status).toBe('401');
    expect(failures).toEqual([]);
    await context.close();
  }, 90_000);

  test('the top bar lists both documents; choosing the management API shows its operations under the same policy', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) failures.push(m.text());
    });
    await page.goto(`${server.url}/docs/`);
    await page.locator('.swagger-ui .info .title').waitFor();
    const select = page.locator('.topbar select');
    expect(await select.locator('option').allInnerTexts()).toEqual(['Public API (/api/v1)', 'Management API (/manage/v1)']);
    expect(await page.locator('.swagger-ui .info .title').innerText()).toContain('Website Chat API');
    await select.selectOption({ label: 'Management API (/manage/v1)' });
    await page.locator('.swagger-ui .info .title', { hasText: 'management API' }).waitFor();
    await page.locator('#operations-Keys-createKey').waitFor();
    expect(await page.locator('#operations-Sites-createSite').count()).toBe(1);
    expect(failures).toEqual([]);
    await context.close();
  }, 60_000);

  test('a key that an earlier release kept in localStorage is removed when the page opens', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    // What persistAuthorization wrote: Swagger UI's own item, with the key in it.
    await page.goto(`${server.url}/openapi.json`);
    await page.evaluate((key) => localStorage.setItem('authorized', JSON.stringify({ bearerAuth: { name: 'bearerAuth', value: key } })), h.site.key);
    await page.goto(`${server.url}/docs/`);
    await page.locator('.swagger-ui .info .title').waitFor();
    expect(await page.evaluate(() => localStorage.getItem('authorized'))).toBeNull();
    expect(await page.locator('.swagger-ui button.authorize.locked').count()).toBe(0);
    await context.close();
  }, 60_000);
});
