/**
 * A visitor's file never runs as a script (issue 16, item 5): a page on the service's own origin
 * loads a visitor-uploaded `text/javascript` file by its signed link with `<script src>`, in
 * Debian's Chromium. `Content-Disposition: attachment` and `CSP: sandbox` do not apply to script
 * loads; the inert Content-Type with `nosniff` does. The same bytes served with a JavaScript type
 * from the same origin do run, so the page would show it if the file ran.
 */
import request from 'supertest';
import type { Browser } from 'playwright-core';
import { createHarness, Harness, listenHttps } from '../helpers/harness';
import { describeInChromium, launchChromium } from '../helpers/chromium';
import { allowOrigins, auth, getToken, w } from '../window/helpers';

const SCRIPT = (flag: string) => `window.${flag} = true; document.title = '${flag}';`;

describeInChromium('visitor files in a browser (SQLite pass only)', () => {
  let h: Harness;
  let service: Awaited<ReturnType<typeof listenHttps>>;
  let browser: Browser;

  beforeAll(async () => {
    h = await createHarness();
    await allowOrigins(h, h.site.id);
    service = await listenHttps(h.app);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await service?.close();
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
    // The signed link, on the origin this test serves the app on.
    const signed = new URL(sent.body.data.message.attachments[0].url);
    const serviceOrigin = service.url;
    const link = `${serviceOrigin}${signed.pathname}${signed.search}`;

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
          return route.fulfill({
            status: 200,
            headers: { 'Content-Type': 'text/javascript', 'X-Content-Type-Options': 'nosniff' },
            body: SCRIPT('controlRan'),
          });
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
