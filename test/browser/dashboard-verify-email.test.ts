/**
 * Verified email and changing it in Chromium, with a real SMTP sink: the account page's "verify
 * your email" banner and its resend, the change-email form, and the page the emailed link opens
 * (used on a click, its token dropped from the address bar). Each page is checked with axe and for
 * CSP violations.
 */
import { describeInChromium } from '../helpers/chromium';
import { waitFor } from '../helpers/wait';
import type { Sink } from '../mail/sink';
import { withMail, WithMail } from '../mail/harness';
import { DashboardHarness, dashboardHarness, PASSWORD, screenshot, seriousAxeFindings, violations } from './dashboard/harness';

describeInChromium('verified email in the dashboard in Chromium (SQLite pass only)', () => {
  let mail: WithMail<DashboardHarness>;
  let d: DashboardHarness;
  let sink: Sink;
  beforeAll(async () => {
    mail = await withMail((env) => dashboardHarness({ env }));
    ({ service: d, sink } = mail);
  }, 60_000);
  afterAll(() => mail?.close());

  const linkTo = async (email: string, subject: string) => {
    await waitFor(`"${subject}" to ${email}`, () => sink.captured.some((c) => c.to.includes(email) && c.mail.subject === subject));
    const mail = sink.captured.find((c) => c.to.includes(email) && c.mail.subject === subject)!.mail;
    return /https:\/\/\S+\/dashboard\/verify-email#token=[0-9A-Za-z]+/.exec(mail.text ?? '')![0];
  };

  test('the banner sends the link again; the change-email form and the link page move the account', async () => {
    // An unverified account (as one made by an invitation is) sees the banner on its account page.
    await d.h.runtime.db('accounts').where({ email: d.agent.email }).update({ email_verified_at: null });
    const page = await d.signedIn(d.agent, '/account');
    const email = page.getByRole('region', { name: 'Email' });
    await email.getByText('Verify your email.').waitFor();
    await email.getByRole('button', { name: 'Send the link again' }).click();
    await email.getByText(`A link is on its way to ${d.agent.email}`).waitFor();
    const verify = await linkTo(d.agent.email, 'Confirm your email address');
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'account-email-unverified');

    await page.goto(verify);
    await page.getByRole('heading', { name: 'Confirm your email address' }).waitFor();
    expect(page.url()).toBe(`${d.origin}/dashboard/verify-email`);
    await page.getByRole('button', { name: 'Confirm this address' }).click();
    await page.getByRole('status').getByText(`${d.agent.email} is verified.`).waitFor();

    await page.goto(`${d.origin}/dashboard/account`);
    const card = page.getByRole('region', { name: 'Email' });
    await card.getByLabel('New email').fill('agent-moved@example.com');
    await card.getByLabel('Current password').fill('wrong password here');
    await card.getByRole('button', { name: 'Change email' }).click();
    await card.getByRole('alert').getByText('The current password is wrong.').waitFor();
    await card.getByLabel('Current password').fill(PASSWORD);
    await card.getByRole('button', { name: 'Change email' }).click();
    await card.getByText('A link is on its way to agent-moved@example.com').waitFor();
    expect(await card.getByText('Verify your email.').count()).toBe(0);
    await screenshot(page, 'account-email-change');

    await page.goto(await linkTo('agent-moved@example.com', 'Confirm your new email address'));
    await page.getByRole('button', { name: 'Confirm this address' }).click();
    await page.getByRole('status').getByText("Your account's email is now agent-moved@example.com.").waitFor();
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await page.goto(`${d.origin}/dashboard/account`);
    await page.getByText('Signed in as').getByText('agent-moved@example.com').waitFor();
    await page.context().close();
  });

  test('no page error', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
