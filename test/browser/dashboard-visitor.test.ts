/**
 * The visitor in context, end to end in Chromium against the real service over HTTPS (issue 25,
 * item 3): a visitor on a shop (another origin, strict CSP: scripts from the shop itself and the
 * service only) whose server signs an identity token, and an owner in the dashboard's inbox. The
 * side panel shows the verified name and the attributes marked verified or not, the page the
 * visitor is on, browser and local time; then, as the visitor follows a link to another page (a
 * page load: the window connects there by itself, without a click) and then navigates inside a
 * single-page app (pushState), the open panel follows live, with addresses stripped of query and
 * fragment. The panel passes axe, folds on a narrow screen and opens with the keyboard, and the
 * owner deletes the visitor's data from it. No CSP violation on either side, no page error.
 */
import { SignJWT } from 'jose';
import { describeInChromium } from '../helpers/chromium';
import { allViolations, panelOf, startShop, type Shop } from './dashboard/shop';
import { checkPage, DashboardHarness, dashboardHarness, provokeViolation, screenshot, violations } from './dashboard/harness';

describeInChromium('the visitor in context beside the real chat window (SQLite pass only)', () => {
  let d: DashboardHarness;
  let shop: Shop;
  let secret: string;

  beforeAll(async () => {
    d = await dashboardHarness();
    secret = (await d.h.runtime.services.access.setIdentity(d.site.id, { mode: 'optional' })).identitySecret!;
    const html = (snippet: string, title: string, body: string) =>
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title><script src="/identity.js"></script>${snippet}</head>` +
      `<body><main><h1>${title}</h1>${body}</main></body></html>`;
    shop = await startShop(d, async (req, res, { origin, snippet }) => {
      const url = new URL(req.url ?? '/', origin);
      if (url.pathname === '/identity.js') {
        // The shop's server signs who is signed in, for each page it serves: short-lived, HS256.
        const token = await new SignJWT({ name: 'Ada Lovelace', email: 'ada@example.com', attributes: { plan: 'pro' } })
          .setProtectedHeader({ alg: 'HS256' })
          .setSubject('customer-42')
          .setExpirationTime('10m')
          .sign(new TextEncoder().encode(secret));
        res.setHeader('Content-Type', 'application/javascript');
        res.end(
          `addEventListener('chatwindow:ready', () => {` +
            `ChatWindow.identify({ identityToken: ${JSON.stringify(token)} });` +
            `ChatWindow.update({ attributes: { cart: 2 } });` +
            `});`,
        );
        return;
      }
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      if (url.pathname === '/pricing') res.end(html(snippet, 'Pricing', '<p>Plans.</p>'));
      else res.end(html(snippet, 'Shop home', '<p><a id="to-pricing" href="/pricing?plan=pro&amp;email=ada%40example.com#compare">See pricing</a></p>'));
    });
  }, 60_000);

  afterAll(async () => {
    await shop?.close();
    await d?.close();
  });

  test('the side panel follows the visitor from page to page, live; the owner deletes the visitor’s data', async () => {
    const inbox = await d.signedIn(d.owner, `/sites/${d.site.id}/inbox`, { viewport: { width: 1400, height: 900 } });
    await inbox.getByText('No conversations here.').waitFor();

    // 1. The visitor, signed in on the shop, opens the window on the home page and writes.
    const shopPage = await (await d.newContext()).newPage();
    await shopPage.goto(`${shop.origin}/`);
    await shopPage.locator('#chat-window-root button.launcher').click();
    let frame = await panelOf(shopPage, d.site.id);
    await frame.locator('#cw-status:empty').waitFor({ state: 'attached' });
    await frame.locator('#cw-input').fill('Which plan has the API?');
    await frame.locator('#cw-input').press('Enter');
    await frame.locator('.msg.mine:not(.pending)').waitFor();

    // 2. The owner opens it: the side panel, beside the conversation at this width.
    const row = inbox.locator('.inbox-rows [data-conversation]');
    await row.first().waitFor({ timeout: 10_000 });
    await row.first().click();
    const panel = inbox.getByRole('complementary', { name: 'Visitor' });
    await panel.locator('.visitor-name', { hasText: 'Ada Lovelace' }).waitFor();
    expect(await panel.locator('.visitor-name').innerText()).toContain('(verified)');
    const attributes = panel.locator('.visitor-attributes');
    await attributes.getByText('cart').waitFor({ timeout: 10_000 });
    expect(await attributes.locator('div', { hasText: 'plan' }).innerText()).toMatch(/pro\s+verified/);
    expect(await attributes.locator('div', { hasText: 'cart' }).innerText()).toMatch(/2\s+unverified/);
    const current = panel.locator('.visitor-current');
    await current.getByText('Shop home').waitFor({ timeout: 10_000 });
    expect(await current.getAttribute('data-url')).toBe(`${shop.origin}/`);
    const facts = panel.locator('.visitor-facts');
    expect(await facts.innerText()).toMatch(/Local time\s+\S/);
    expect(await facts.innerText()).toMatch(/Browser\s+\S+/);
    expect(await facts.innerText()).toContain('ada@example.com');
    await checkPage(inbox, 'inbox-visitor-panel');

    // 3. The visitor follows a link: a new page load. The window connects there without a click
    //    (the conversation is open) and reports the page, query and fragment cut off in the browser.
    await shopPage.locator('#to-pricing').click();
    await shopPage.waitForURL(/\/pricing/);
    await current.getByText('Pricing').waitFor({ timeout: 15_000 });
    expect(await current.getAttribute('data-url')).toBe(`${shop.origin}/pricing`);
    await panel.getByRole('heading', { name: 'This visit (2 pages)' }).waitFor();
    frame = await panelOf(shopPage, d.site.id);
    expect(await shopPage.locator('#chat-window-root button.launcher').getAttribute('aria-expanded')).toBe('false');

    // 4. A single-page app's navigation (pushState, no load): the loader notices, the panel follows.
    await shopPage.evaluate(() => {
      history.pushState({}, '', '/pricing/annual?coupon=SECRET');
      document.title = 'Annual pricing';
    });
    await current.getByText('Annual pricing').waitFor({ timeout: 15_000 });
    expect(await current.getAttribute('data-url')).toBe(`${shop.origin}/pricing/annual`);
    await panel.getByRole('heading', { name: 'This visit (3 pages)' }).waitFor();
    expect(await panel.innerText()).not.toContain('SECRET');
    expect(await panel.innerText()).not.toContain('ada%40example.com');
    await screenshot(inbox, 'inbox-visitor-moved');

    // 5. On a narrow screen the panel folds under the header and opens from the keyboard.
    await inbox.setViewportSize({ width: 900, height: 900 });
    const toggle = panel.getByRole('button', { name: /^Visitor: Ada Lovelace/ });
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    expect(await panel.locator('.visitor-facts').isVisible()).toBe(false);
    await toggle.focus();
    await inbox.keyboard.press('Enter');
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    await panel.locator('.visitor-facts').waitFor({ state: 'visible' });
    await checkPage(inbox, 'inbox-visitor-panel-narrow');

    // 6. The owner deletes the visitor's data: the conversation leaves the list, the data the database.
    await panel.getByRole('button', { name: 'Delete visitor’s data' }).click();
    const dialog = inbox.getByRole('dialog', { name: 'Delete this visitor’s data?' });
    await dialog.getByRole('button', { name: 'Delete everything' }).click();
    await inbox.getByText('No conversations here.').waitFor();
    expect(await d.h.runtime.db('conversations').where({ site_id: d.site.id, visitor_id: 'user:customer-42' })).toEqual([]);
    expect(await d.h.runtime.db('visitors').where({ site_id: d.site.id, id: 'user:customer-42' })).toEqual([]);

    // 7. No CSP violation in the inbox, the shop or the window's frame; no page error.
    expect(await violations(inbox)).toEqual([]);
    expect(await allViolations(shopPage)).toEqual([]);
    expect(d.pageErrors).toEqual([]);
    expect((await provokeViolation(inbox)).length).toBeGreaterThan(0);
    expect((await provokeViolation(shopPage)).length).toBeGreaterThan(0);
  }, 90_000);
});
