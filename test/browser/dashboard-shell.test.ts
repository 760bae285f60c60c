/**
 * The dashboard's foundation in Chromium against the real service over HTTPS: sign-in and
 * sign-out, the keys page end to end (a key made in the page works on the public API until it is
 * revoked there), roles, a session that ends while something is being typed, CSP, axe, keyboard
 * use and a phone-width layout. Screenshots go to test-artifacts/dashboard/.
 */
import request from 'supertest';
import type { Route } from 'playwright-core';
import { describeInChromium, waitForFocus } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, provokeViolation, violations, PASSWORD, checkPage } from './dashboard/harness';

describeInChromium('the dashboard in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  const keysPath = () => `/sites/${d.site.id}/keys`;
  /** CSP clean and axe clean, then a screenshot: what every page visited gets. */

  test('the CSP recorder hears a violation caused on purpose', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect((await provokeViolation(page)).join()).toMatch(/style-src/);
    await page.context().close();
  });

  test('sign-in: a wrong password and an unknown email get the same answer; then signed in, signed out', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/`);
    await checkPage(page, 'sign-in');
    await d.signIn(page, d.owner.email, 'not the password at all');
    const message = () => page.getByRole('alert').locator('p').first().innerText(); // without the request id
    const wrong = await message();
    expect(wrong).toMatch(/email or password is wrong/i);
    await d.signIn(page, 'nobody@example.com', 'not the password at all');
    await page.getByRole('alert').waitFor();
    expect(await message()).toBe(wrong);

    await d.signIn(page, d.owner.email);
    await page.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/dashboard/sites/${d.site.id}/inbox`);
    // An owner's navigation: every page.
    expect(await page.getByRole('navigation', { name: 'Site pages' }).getByRole('link').allInnerTexts()).toEqual([
      'Inbox',
      'Keys',
      'Events',
      'Settings',
      'Team',
    ]);
    await checkPage(page, 'inbox-placeholder');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    // The session cookie is gone; the device cookie stays, so this browser gets past a stranger's lock-out.
    expect((await page.context().cookies(d.origin)).map((c) => c.name)).toEqual(['__Host-device']);
    // The session is gone on the server: reloading a page asks to sign in.
    await page.goto(`${d.origin}/dashboard${keysPath()}`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('keys: create one, see it once, use it on the public API, revoke it and the API refuses it', async () => {
    const page = await d.signedIn(d.owner, keysPath());
    await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
    await page.getByLabel('Label').fill('Zapier from the dashboard');
    await page.getByLabel(/Read files/).check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByRole('textbox', { name: 'Access key' });
    await secret.waitFor();
    const key = await secret.inputValue();
    expect(key).toMatch(/^wck_[0-9A-Za-z]{20,}$/);
    await expect(page.getByText(/shown once/).isVisible()).resolves.toBe(true);
    await checkPage(page, 'keys-created');

    const row = page.getByRole('row').filter({ hasText: 'Zapier from the dashboard' });
    expect(await row.innerText()).toContain('conversations:read, conversations:write, media:read');
    expect(await row.innerText()).toContain('you');
    expect(await row.innerText()).toContain(key.slice(0, 12));
    expect(await row.innerText()).not.toContain(key);

    const api = () => request(d.h.app).get('/api/v1/conversations').set('Authorization', `Bearer ${key}`);
    expect((await api()).status).toBe(200);

    // Dismissed, the value is gone from the page; a reload lists the key without it.
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(key);
    await page.reload();
    await page.getByRole('row').filter({ hasText: 'Zapier from the dashboard' }).waitFor();
    expect(await page.content()).not.toContain(key);

    // Esc leaves the confirmation without revoking, and the focus returns to the button that opened it.
    const revoke = page.getByRole('button', { name: 'Revoke Zapier from the dashboard' });
    await revoke.click();
    const dialog = page.getByRole('dialog', { name: /Revoke/ });
    await dialog.waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel'); // Enter does no harm
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect(await revoke.evaluate((el) => el === document.activeElement)).toBe(true);
    expect((await api()).status).toBe(200);

    await revoke.click();
    await dialog.waitFor();
    await checkPage(page, 'keys-revoke-confirm');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByRole('row').filter({ hasText: 'Zapier from the dashboard' }).getByText('Revoked').waitFor();
    const refused = await api();
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
    await checkPage(page, 'keys');
    await page.context().close();
  });

  test('an agent sees the inbox only; the keys page by its address says owners only and shows no key', async () => {
    const page = await d.signedIn(d.agent);
    await page.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    expect(await page.getByRole('navigation', { name: 'Site pages' }).getByRole('link').allInnerTexts()).toEqual(['Inbox']);
    const keyCalls: number[] = [];
    page.on('response', (r) => {
      if (r.url().includes('/manage/v1/') && r.url().includes('/keys')) keyCalls.push(r.status());
    });
    await page.goto(`${d.origin}/dashboard${keysPath()}`);
    await page.getByText('Owners only.').waitFor();
    expect(await page.locator('table').count()).toBe(0);
    expect(await page.content()).not.toContain('wck_');
    expect(keyCalls).toEqual([]); // the page was not even mounted
    // And the API refuses it anyway.
    const refused = await page.evaluate(async (siteId) => (await fetch(`/manage/v1/sites/${siteId}/keys`)).status, d.site.id);
    expect(refused).toBe(403);
    await checkPage(page, 'agent-owners-only');
    await page.context().close();
  });

  test('a session that ends while typing: the dialog signs in over the page, the text stays, the call completes', async () => {
    const page = await d.signedIn(d.owner, keysPath());
    await page.getByLabel('Label').fill('Typed before the session ended');
    // The page's own first read finishes first: this is about the call the click makes.
    await page.getByText('Loading keys…').waitFor({ state: 'hidden' });
    await d.h.runtime.db('sessions').where({ account_id: d.owner.id }).del(); // ended on the server (idle, expired or revoked alike)
    await page.getByRole('button', { name: 'Create key' }).click();

    const dialog = page.getByRole('dialog', { name: 'Your session ended' });
    await dialog.waitFor();
    // The page is still there behind the dialog, with what was typed.
    expect(await page.getByLabel('Label').inputValue()).toBe('Typed before the session ended');
    expect(await dialog.getByLabel('Email').inputValue()).toBe(d.owner.email);
    // The password is what is left to type: it has the focus.
    expect(await dialog.getByLabel('Password').evaluate((el) => el === document.activeElement)).toBe(true);
    await checkPage(page, 'session-ended-dialog');
    await dialog.getByLabel('Password').fill(PASSWORD);
    await dialog.getByRole('button', { name: 'Sign in' }).click();

    await page.getByRole('textbox', { name: 'Access key' }).waitFor();
    expect(await dialog.count()).toBe(0);
    await page.getByRole('row').filter({ hasText: 'Typed before the session ended' }).waitFor();
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('keyboard only: sign in and reach the keys page without a mouse', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard${keysPath()}`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    // The email field takes the focus on arrival (autofocus applies at the next frame after rendering).
    await page.waitForFunction(() => document.activeElement?.getAttribute('autocomplete') === 'username');
    await page.keyboard.type(d.owner.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
    // Tab reaches the navigation; Enter on a link moves there.
    for (let i = 0; i < 30; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.textContent)) === 'Team') break;
    }
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Team', level: 1 }).waitFor();
    // Focus moved to the new page's heading.
    await waitForFocus(page.getByRole('heading', { name: 'Team', level: 1 }));
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('a phone-width layout (375x740): nothing wider than the screen', async () => {
    const page = await d.signedIn(d.owner, keysPath(), { viewport: { width: 375, height: 740 } });
    await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
    await page.getByRole('table').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await checkPage(page, 'keys-phone');
    await page.context().close();
  });

  test('an invitation link: the token in the fragment, a new account joins and lands in the inbox', async () => {
    const manager = { accountId: d.owner.id, email: d.owner.email, via: 'token' as const };
    const { token, url } = await d.h.runtime.services.accounts.invitations.create({ manager, clientIp: null }, d.site.id, 'new@example.com', 'agent');
    expect(url).toBe(`${d.origin}/dashboard/accept-invitation#token=${token}`); // the link the owner sends is this page's
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/accept-invitation#token=${token}`);
    await page.getByRole('heading', { name: 'Accept an invitation' }).waitFor();
    expect(page.url()).not.toContain(token); // dropped from the address bar and the history
    await page.getByLabel(/Email/).fill('new@example.com');
    await page.getByLabel('Password').fill('a long enough new password');
    await checkPage(page, 'accept-invitation');
    await page.getByRole('button', { name: 'Accept invitation' }).click();
    await page.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    await page.getByText('new@example.com').waitFor();
    await page.context().close();
  });

  test('a page whose module cannot be fetched offers to try again, and trying again opens it', async () => {
    const page = await d.signedIn(d.owner, `/sites/${d.site.id}/inbox`);
    await page.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    // The connection drops: the settings page's modules cannot be fetched.
    const refused: string[] = [];
    const drop = (route: Route) => {
      refused.push(route.request().url());
      return route.abort('internetdisconnected');
    };
    await page.route('**/dashboard/**/*.js', drop);
    await page.getByRole('navigation', { name: 'Site pages' }).getByRole('link', { name: 'Settings' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'This page could not be loaded' });
    await alert.waitFor();
    expect(refused.length).toBeGreaterThan(0);
    await checkPage(page, 'lazy-page-failed');
    await page.unroute('**/dashboard/**/*.js', drop); // and comes back
    await alert.getByRole('button', { name: 'Try again' }).click();
    await page.getByRole('heading', { name: 'Site name', level: 2 }).waitFor();
    expect(await alert.count()).toBe(0);
    await page.context().close();
  });

  test('no page error in any page visited', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
