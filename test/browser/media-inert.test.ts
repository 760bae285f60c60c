/**
 * A visitor's file never runs as a script (issue 16, item 5): a page on the service's own origin
 * loads a visitor-uploaded `text/javascript` file by its signed link with `<script src>`, in
 * Debian's Chromium. `Content-Disposition: attachment` and `CSP: sandbox` do not apply to script
 * loads; the inert Content-Type with `nosniff` does. The same bytes served with a JavaScript type
 * from the same origin do run, so the page would show it if the file ran.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import request from 'supertest';
import { chromium, Browser } from 'playwright-core';
import { createHarness, Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { freePort } from '../helpers/spawn';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { allowOrigins, auth, getToken, w } from '../window/helpers';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`Chromium is required in CI (${CHROMIUM}); .ci/run installs it`);
if (!available) console.warn(`test/browser/media-inert.test.ts skipped: no Chromium at ${CHROMIUM}`);
// The browser path does not depend on the database engine: it runs once, on the SQLite pass.
const run = available && TEST_DB === 'sqlite' ? describe : describe.skip;

const SCRIPT = (flag: string) => `window.${flag} = true; document.title = '${flag}';`;

function listen(server: http.Server | https.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

run('visitor files in a browser (SQLite pass only)', () => {
  let h: Harness;
  let service: https.Server;
  let serviceOrigin: string;
  let browser: Browser;

  beforeAll(async () => {
    const port = await freePort();
    serviceOrigin = `https://localhost:${port}`;
    h = await createHarness({ env: { PUBLIC_URL: serviceOrigin } });
    await allowOrigins(h, h.site.id);
    const tls = await makeSelfSignedCert();
    service = https.createServer({ cert: tls.cert, key: tls.key }, h.app);
    await listen(service, port);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (service) {
      service.closeAllConnections();
      await new Promise<void>((resolve) => service.close(() => resolve()));
    }
    await h?.close();
  });

  test('a visitor-uploaded text/javascript file loaded with <script src> on the service origin does not run', async () => {
    const visitor = await getToken(h.app, h.site.id);
    const sent = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set(auth(visitor.token))
      .field('clientMessageId', 'inert-1')
      .attach('file', Buffer.from(SCRIPT('visitorFileRan')), { filename: 'payload.js', contentType: 'text/javascript' });
    expect(sent.status).toBe(201);
    const link: string = sent.body.data.message.attachments[0].url;
    expect(new URL(link).origin).toBe(serviceOrigin);

    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      const console: string[] = [];
      page.on('console', (m) => console.push(m.text()));
      const linkAnswers: { status: number; type: string | undefined }[] = [];
      page.on('response', (r) => {
        if (r.url() === link) linkAnswers.push({ status: r.status(), type: r.headers()['content-type'] });
      });
      // A page of the service's own origin (the attacker's best case) and, as the control, the
      // same bytes served from that origin as JavaScript with nosniff: the browser side of the
      // test is played by this route, the file comes from the real service.
      await page.route(`${serviceOrigin}/__test/**`, (route) => {
        const url = new URL(route.request().url());
        if (url.pathname === '/__test/control.js') {
          return route.fulfill({ status: 200, headers: { 'Content-Type': 'text/javascript', 'X-Content-Type-Options': 'nosniff' }, body: SCRIPT('controlRan') });
        }
        return route.fulfill({
          status: 200,
          headers: { 'Content-Type': 'text/html; charset=utf-8' },
          body: `<!doctype html><html><head><title>page</title></head><body><script src="${link.replace(/&/g, '&amp;')}"></script><script src="/__test/control.js"></script></body></html>`,
        });
      });
      await page.goto(`${serviceOrigin}/__test/page`, { waitUntil: 'load' });

      const ran = await page.evaluate(() => ({
        visitorFileRan: (window as unknown as { visitorFileRan?: boolean }).visitorFileRan ?? false,
        controlRan: (window as unknown as { controlRan?: boolean }).controlRan ?? false,
      }));
      expect(ran).toEqual({ visitorFileRan: false, controlRan: true });
      // The link was loaded (not missing or refused by the service): the browser would not run it.
      expect(linkAnswers).toEqual([{ status: 200, type: 'application/octet-stream' }]);
      expect(console.join('\n')).toMatch(/Refused to execute script from .*MIME type \('application\/octet-stream'\) is not executable/);
    } finally {
      await context.close();
    }
  });
});
