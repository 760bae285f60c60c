/**
 * Swagger UI (swagger-ui-express) at /docs/: the page runs under a policy without inline scripts,
 * and in a real browser (Debian's Chromium driven by playwright-core) a developer authorizes with a
 * key, "Try it out" on GET /conversations answers 200 from the server, and the key survives a reload.
 */
import fs from 'node:fs';
import request from 'supertest';
import { chromium, Browser } from 'playwright-core';
import { createHarness, Harness, listenHttps } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';

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
    expect(scripts.map(([, attributes]) => attributes.match(/src="([^"]+)"/)?.[1])).toEqual(['./swagger-ui-bundle.js', './swagger-ui-standalone-preset.js', './swagger-ui-init.js']);
    expect(scripts.every(([, , body]) => body.trim() === '')).toBe(true);

    const init = await request(h.app).get('/docs/swagger-ui-init.js');
    expect(init.status).toBe(200);
    expect(init.headers['content-type']).toMatch(/^application\/javascript/);
    expect(init.text).toContain('"swaggerUrl": "/openapi.json"');
    for (const setting of ['"persistAuthorization": true', '"tryItOutEnabled": true', '"displayRequestDuration": true', '"validatorUrl": null']) {
      expect(init.text).toContain(setting);
    }
    expect((await request(h.app).get('/docs/swagger-ui-bundle.js')).status).toBe(200);
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

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`Chromium is required in CI (${CHROMIUM}); .ci/run installs it`);
// The browser path does not depend on the database engine: run it once, on the SQLite pass.
const run = available && TEST_DB === 'sqlite' ? describe : describe.skip;

run('Swagger UI', () => {
  let h: Harness;
  let server: Awaited<ReturnType<typeof listenHttps>>;
  let browser: Browser;
  let convId: string;

  beforeAll(async () => {
    h = await createHarness();
    convId = (await h.visitorSay(h.site.id, 'v-swagger', 'Hello from the browser test')).conversation.id;
    server = await listenHttps(h.app);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await h?.close();
  });

  test('Authorize with a key, then Try it out on GET /conversations answers 200', async () => {
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

    // persistAuthorization: opened again, the page still has the key and Try it out answers 200.
    await page.goto(`${server.url}/docs/`); // not reload(): deepLinking put the open operation in the URL
    await page.locator('.swagger-ui .info .title').waitFor();
    expect(await page.locator('.swagger-ui button.authorize.locked').count()).toBeGreaterThan(0);
    expect((await tryListConversations()).status).toBe('200');
    expect(failures).toEqual([]);
    await context.close();
  }, 90_000);
});
