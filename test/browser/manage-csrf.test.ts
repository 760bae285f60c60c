/**
 * The management API's session cookie and cross-site rule in a real browser (Chromium): a page of
 * the service's own origin signs in and changes things; pages of another origin on the same site
 * (another port of localhost: the Lax cookie goes along) and of another site (127.0.0.1) try to
 * change things with the signed-in browser's cookie, and fail.
 */
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { Harness } from '../helpers/harness';
import { describeInChromium, launchChromium } from '../helpers/chromium';
import { freePort } from '../helpers/spawn';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { manageHarness, newMember, PASSWORD } from '../manage/helpers';

describeInChromium('the management API in Chromium', () => {
  let h: Harness;
  let browser: Browser;
  let context: BrowserContext;
  let serviceOrigin: string;
  const servers: https.Server[] = [];
  const seen: { path: string; cookie: boolean; site: string | undefined; status?: number }[] = [];
  const attackers: Record<'sameSite' | 'crossSite', string> = { sameSite: '', crossSite: '' };

  /** A page that submits a form to the service as soon as it loads: the classic CSRF. */
  const formPage = (action: string) =>
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Win a prize</title></head><body>
     <form id="f" method="POST" action="${action}" enctype="text/plain"><input name='{"label":"planted","x":"' value='"}'></form>
     <script>document.getElementById('f').submit()</script></body></html>`;

  beforeAll(async () => {
    const tls = await makeSelfSignedCert(); // names localhost and 127.0.0.1
    const port = await freePort();
    serviceOrigin = `https://localhost:${port}`;
    h = await manageHarness({ env: { PUBLIC_URL: serviceOrigin } });
    await newMember(h, h.site.id, 'ana@example.com', 'owner');
    const service = https.createServer({ cert: tls.cert, key: tls.key }, (req: IncomingMessage, res) => {
      const entry = {
        path: `${req.method} ${req.url}`,
        cookie: /__Host-session=/.test(req.headers.cookie ?? ''),
        site: req.headers['sec-fetch-site'] as string | undefined,
        status: undefined as number | undefined,
      };
      seen.push(entry);
      res.on('finish', () => (entry.status = res.statusCode));
      h.app(req as never, res as never);
    });
    await new Promise<void>((resolve) => service.listen(port, '127.0.0.1', resolve));
    servers.push(service);
    for (const [name, host] of [
      ['sameSite', 'localhost'],
      ['crossSite', '127.0.0.1'],
    ] as const) {
      const attackerPort = await freePort();
      attackers[name] = `https://${host}:${attackerPort}`;
      const attacker = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.end(req.url === '/' ? formPage(`${serviceOrigin}/manage/v1/tokens`) : '<!doctype html><title>Nothing here</title>');
      });
      await new Promise<void>((resolve) => attacker.listen(attackerPort, '127.0.0.1', resolve));
      servers.push(attacker);
    }
    browser = await launchChromium();
    context = await browser.newContext({ ignoreHTTPSErrors: true });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await h?.close();
  });

  const tokens = async () => Number((await h.runtime.db('management_tokens').count({ n: '*' }).first())!.n);
  const onService = async (): Promise<Page> => {
    const page = await context.newPage();
    await page.goto(`${serviceOrigin}/healthz`);
    return page;
  };

  test('a page of the service signs in with fetch: the __Host- cookie is kept and sent; same-origin changes pass', async () => {
    const page = await onService();
    const signedIn = await page.evaluate(async (password) => {
      const r = await fetch('/manage/v1/session', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: 'ana@example.com', password }),
      });
      return r.status;
    }, PASSWORD);
    expect(signedIn).toBe(200);
    const cookies = await context.cookies(serviceOrigin);
    // The session's cookie, and the device cookie a sign-in sets beside it (Strict: never sent cross-site).
    expect(cookies).toEqual([
      expect.objectContaining({ name: '__Host-session', httpOnly: true, secure: true, sameSite: 'Lax', path: '/' }),
      expect.objectContaining({ name: '__Host-device', httpOnly: true, secure: true, sameSite: 'Strict', path: '/' }),
    ]);
    expect(await page.evaluate(() => document.cookie)).toBe(''); // HttpOnly: page scripts cannot read it

    const made = await page.evaluate(
      async () => (await fetch('/manage/v1/tokens', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"label":"mine"}' })).status,
    );
    expect(made).toBe(201);
    expect(seen.find((s) => s.path === 'POST /manage/v1/tokens')).toMatchObject({ cookie: true, site: 'same-origin', status: 201 });
    await page.close();
  });

  test('a form on another origin of the same site carries the Lax cookie, and is refused by Fetch Metadata', async () => {
    const before = await tokens();
    const page = await context.newPage();
    const answer = page.waitForResponse((r) => r.url() === `${serviceOrigin}/manage/v1/tokens`);
    await page.goto(`${attackers.sameSite}/`);
    const res = await answer;
    expect(res.status()).toBe(403);
    expect((await res.json()).error.code).toBe('cross_site_request');
    // The browser did send the session: SameSite=Lax alone would not have stopped this request.
    expect(seen[seen.length - 1]).toMatchObject({ path: 'POST /manage/v1/tokens', cookie: true, site: 'same-site', status: 403 });
    expect(await tokens()).toBe(before);
    await page.close();
  });

  test('a form and a fetch from another site are refused and read nothing', async () => {
    const before = await tokens();
    const page = await context.newPage();
    const answer = page.waitForResponse((r) => r.url() === `${serviceOrigin}/manage/v1/tokens`);
    await page.goto(`${attackers.crossSite}/`);
    expect((await answer).status()).toBe(403);
    expect(seen[seen.length - 1]).toMatchObject({ path: 'POST /manage/v1/tokens', site: 'cross-site', status: 403 });

    // A script there cannot read the API either: no CORS header on any answer.
    await page.goto(`${attackers.crossSite}/blank`);
    const read = await page.evaluate(async (origin) => {
      try {
        await fetch(`${origin}/manage/v1/me`, { credentials: 'include' });
        return 'read';
      } catch {
        return 'refused';
      }
    }, serviceOrigin);
    expect(read).toBe('refused');
    expect(await tokens()).toBe(before);
    await page.close();
  });
});
