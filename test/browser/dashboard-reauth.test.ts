/**
 * The re-authentication dialog in Chromium against the real service over HTTPS: an operation that
 * needs a recent password proof (`x-sudo`), sent after the session's 10-minute window closed, is
 * answered 403 `reauthentication_required`; the dashboard asks for the password, confirms it
 * (POST /session/sudo) and sends the operation again once. Cancelled, the operation fails with a
 * sentence and is not sent again. Tokens made before the last password change are called out.
 */
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { SUDO_WINDOW_MS } from '../../server/accounts/session-rules';
import { DashboardHarness, dashboardHarness, PASSWORD, checkPage, recordProblems } from './dashboard/harness';

describeInChromium('re-authentication in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;

  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(() => d?.close());

  /** The owner's sessions proved the password 11 minutes ago: their sudo windows are closed (still active). */
  const closeTheWindow = () =>
    d.h.runtime
      .db('sessions')
      .where({ account_id: d.owner.id })
      .update({ created_at: Date.now() - SUDO_WINDOW_MS - 60_000, reauthenticated_at: null });
  const tokenPosts = (page: Page) => {
    const statuses: number[] = [];
    page.on('response', (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/manage/v1/tokens' && statuses.push(r.status()));
    return statuses;
  };

  test('a refused token creation asks for the password, confirms it and is sent again once', async () => {
    const page = await d.signedIn(d.owner, '/account');
    await page.getByRole('heading', { name: 'Management tokens' }).waitFor();
    await closeTheWindow();
    const problems = recordProblems(page);
    const posts = tokenPosts(page);

    await page.getByLabel('Token label').fill('deploy script');
    await page.getByRole('button', { name: 'Create token' }).click();
    const dialog = page.getByRole('dialog', { name: 'Confirm your password' });
    await dialog.waitFor();
    await checkPage(page, 'reauth-dialog');
    await dialog.getByLabel('Password').fill(PASSWORD);
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await page.getByRole('textbox', { name: 'Management token' }).inputValue()).toMatch(/^wcm_[0-9A-Za-z]{43,}$/);
    expect(posts).toEqual([403, 201]);
    // The log on the page is read again at the next visit; the server's has the confirmation.
    const actions = (await d.h.runtime.db('security_log').where({ account_id: d.owner.id }).select('action')).map((r: { action: string }) => r.action);
    expect(actions).toContain('sudo.granted');
    // The refusal that opened the dialog is the server's answer by design; nothing else went wrong.
    expect(problems.filter((p) => !/403/.test(p))).toEqual([]);
    expect(problems.filter((p) => p.startsWith('403'))).toEqual(['403 POST /manage/v1/tokens']);
    await checkPage(page, 'reauth-confirmed');
  });

  test('cancelled, the operation fails with a sentence and is not sent again', async () => {
    const page = await d.signedIn(d.owner, '/account');
    await page.getByRole('heading', { name: 'Management tokens' }).waitFor();
    await closeTheWindow();
    const posts = tokenPosts(page);
    await page.getByLabel('Token label').fill('never made');
    await page.getByRole('button', { name: 'Create token' }).click();
    const dialog = page.getByRole('dialog', { name: 'Confirm your password' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByText('This needs your password confirmed, which was cancelled.').waitFor();
    expect(posts).toEqual([403]);
  });

  test('a token made before the last password change is called out on the account page', async () => {
    const page = await d.signedIn(d.owner, '/account');
    await page.getByRole('heading', { name: 'Management tokens' }).waitFor();
    // Made inside the sign-in's window, then the password changes (the same one again: it still counts).
    await page.getByLabel('Token label').fill('old script');
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.getByRole('textbox', { name: 'Management token' }).waitFor();
    await page.waitForTimeout(5); // the change must come at least a millisecond after the token
    await page.getByRole('form', { name: 'Change password' }).getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed.').waitFor();
    await page.getByRole('alert').filter({ hasText: 'made before your last password change' }).waitFor();
    await page.getByText('Before password change').first().waitFor();
    await checkPage(page, 'account-flagged-tokens');
  });
});
