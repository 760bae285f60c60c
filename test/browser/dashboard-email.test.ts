/**
 * Forgot password in Chromium, with a real SMTP sink: the sign-in page's link, the request (the
 * same answer for any email), the emailed link opening the reset page (its token dropped from the
 * address bar), the new password, and signing in with it; the settings page's mail log and test
 * email. Each page is checked with axe and for CSP violations.
 */
import { describeInChromium } from '../helpers/chromium';
import { waitFor } from '../helpers/wait';
import type { Sink } from '../mail/sink';
import { withMail, WithMail } from '../mail/harness';
import { DashboardHarness, dashboardHarness, screenshot, seriousAxeFindings, violations } from './dashboard/harness';

describeInChromium('email in the dashboard in Chromium (SQLite pass only)', () => {
  let mail: WithMail<DashboardHarness>;
  let d: DashboardHarness;
  let sink: Sink;
  beforeAll(async () => {
    mail = await withMail((env) => dashboardHarness({ env }));
    ({ service: d, sink } = mail);
  }, 60_000);
  afterAll(() => mail?.close());

  test('from the sign-in page to a new password and back in', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/`);
    await page.getByRole('link', { name: 'Forgot your password?' }).click();
    await page.getByRole('heading', { name: 'Forgot your password?' }).waitFor();
    await page.getByLabel('Email').fill(d.agent.email);
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page.getByRole('status').getByText('If an account has this email').waitFor();
    await screenshot(page, 'forgot-password');

    await waitFor('the reset email', () => sink.captured.some((c) => c.to.includes(d.agent.email)));
    const mail = sink.captured.find((c) => c.to.includes(d.agent.email))!.mail;
    const link = /https:\/\/\S+\/dashboard\/reset-password#token=[0-9A-Za-z]+/.exec(mail.text ?? '')![0];
    expect(link.startsWith(`${d.origin}/dashboard/reset-password#token=`)).toBe(true);

    await page.goto(link);
    await page.getByRole('heading', { name: 'Set a new password' }).waitFor();
    expect(page.url()).toBe(`${d.origin}/dashboard/reset-password`);
    await page.getByLabel('New password', { exact: true }).fill('my fresh agent password');
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'reset-password');
    await page.getByRole('button', { name: 'Set the new password' }).click();
    await page.getByRole('heading', { name: 'Your new password is set' }).waitFor();
    await d.signIn(page, d.agent.email, 'my fresh agent password');
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.context().close();

    // The link works once: a second profile opening it is told so in the page.
    const again = await (await d.newContext()).newPage();
    await again.goto(link);
    await again.getByLabel('New password', { exact: true }).fill('yet another agent password');
    await again.getByRole('button', { name: 'Set the new password' }).click();
    await again
      .getByRole('alert')
      .getByText(/unknown, used or expired/)
      .waitFor();
    await again.context().close();
  });

  test("the settings page's mail log and test email", async () => {
    const page = await d.signedIn(d.owner, `/sites/${d.site.id}/settings`);
    const section = page.getByRole('region', { name: 'Email' });
    await section.getByRole('button', { name: 'Send me a test email' }).click();
    await section.getByRole('status').getByText(`A test email to ${d.owner.email} is queued`).waitFor();
    await waitFor('the test email', () => sink.captured.some((c) => c.to.includes(d.owner.email) && c.mail.subject?.startsWith('Test email')));
    await waitFor('the log to show it sent', async () => {
      await section.getByRole('button', { name: 'Refresh' }).click();
      return (await section.getByRole('cell', { name: 'sent', exact: true }).count()) === 1;
    });
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'settings-mail');
    await page.context().close();
  });

  test('no page error', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
