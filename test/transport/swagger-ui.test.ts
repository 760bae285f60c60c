/**
 * Swagger UI in a real browser (Debian's Chromium driven by playwright-core): a developer opens
 * /docs/, authorizes with a key, and "Try it out" on GET /conversations answers 200 from the server.
 */
import fs from 'node:fs';
import { chromium, Browser } from 'playwright-core';
import { createHarness, Harness, listenHttps } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';

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
    await page.goto(`${server.url}/docs/`);
    await page.locator('.swagger-ui .info .title').waitFor();
    expect(await page.locator('.swagger-ui .info .title').innerText()).toContain('Website Chat API');

    await page.locator('button.authorize').first().click();
    await page.locator('.auth-container input[type=text], .auth-container input[type=password]').first().fill(h.site.key);
    await page.locator('.auth-btn-wrapper button.authorize').first().click();
    await page.locator('.auth-btn-wrapper button.btn-done').first().click();

    const op = page.locator('#operations-Conversations-listConversations');
    await op.locator('.opblock-summary').click();
    // tryItOutEnabled is on in /docs/init.js: the form is already editable.
    await op.locator('button.execute').click();
    const status = op.locator('.live-responses-table .response .response-col_status').first();
    await status.waitFor({ timeout: 15_000 });
    expect((await status.innerText()).trim()).toBe('200');
    expect(await op.locator('.live-responses-table .microlight').first().innerText()).toContain(convId);
    expect(failures).toEqual([]);
    await context.close();
  }, 60_000);
});
