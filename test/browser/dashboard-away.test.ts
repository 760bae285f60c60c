/**
 * Business hours and the emails of waiting visitors in Chromium against the real service: an owner
 * sets the site's hours, away message and whether it is away while nobody is online (a wrong range
 * named by the service, then saved and kept over a reload); an agent chooses which waiting visitors they are emailed about. Every page: no CSP
 * violation, axe clean, a screenshot in test-artifacts/dashboard/.
 */
import { describeInChromium } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, checkPage } from './dashboard/harness';

describeInChromium('business hours and alert emails in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  test('an owner sets business hours and the away message; a wrong range is named; the saved hours are kept', async () => {
    const page = await d.signedIn(d.owner, `/sites/${d.site.id}/settings`);
    const card = page.getByRole('region', { name: 'Business hours' });
    await card.getByLabel('Use business hours.').check();
    // A site answered through the API: not away for want of a member online.
    expect(await card.getByLabel('Away while no one has the inbox open.').isChecked()).toBe(true);
    await card.getByLabel('Away while no one has the inbox open.').uncheck();
    await card.getByLabel('Time zone').fill('Europe/Berlin');
    await card.getByLabel('Monday').fill('09:00-12:00, 13:00-17:00');
    await card.getByLabel('Tuesday').fill('17:00-09:00');
    await card.getByLabel('Away message').fill('Back on Monday at nine.');
    await card.getByRole('button', { name: 'Save' }).click();
    // The service's words for the problem, under the form's name for the field; nothing is saved.
    await card.getByRole('alert').getByText('Tuesday: a range ends after it starts (split a night into two days)').waitFor();
    expect(await card.getByRole('status').innerText()).toBe('');
    await checkPage(page, 'business-hours-error');

    await card.getByLabel('Tuesday').fill('09:00-17:00');
    await card.getByRole('button', { name: 'Save' }).click();
    await card.getByRole('status').getByText('Saved.').waitFor();
    await checkPage(page, 'business-hours-saved');

    await page.reload();
    const again = page.getByRole('region', { name: 'Business hours' });
    await again.getByLabel('Monday').waitFor();
    expect(await again.getByLabel('Monday').inputValue()).toBe('09:00-12:00, 13:00-17:00');
    expect(await again.getByLabel('Time zone').inputValue()).toBe('Europe/Berlin');
    expect(await again.getByLabel('Away message').inputValue()).toBe('Back on Monday at nine.');
    const saved = await page.evaluate(async (siteId) => (await (await fetch(`/manage/v1/sites/${siteId}/business-hours`)).json()).data, d.site.id);
    expect(saved).toMatchObject({ enabled: true, timeZone: 'Europe/Berlin', awayMessage: 'Back on Monday at nine.', awayWhenNoAgentOnline: false });
    expect(await again.getByLabel('Away while no one has the inbox open.').isChecked()).toBe(false);
    expect(saved.week.mon).toEqual([
      ['09:00', '12:00'],
      ['13:00', '17:00'],
    ]);
    expect(saved.week.sun).toEqual([]);
    await page.context().close();
  });

  test('an agent chooses the emails of waiting visitors on the account page; Save is enabled only by a change', async () => {
    const page = await d.signedIn(d.agent, '/account');
    const siteName = await page.evaluate(async () => (await (await fetch('/manage/v1/me')).json()).data.sites[0].name as string);
    const form = page.getByRole('form', { name: `Emails of waiting visitors on ${siteName}` });
    const save = form.getByRole('button', { name: 'Save' });
    await save.waitFor();
    expect(await save.isDisabled()).toBe(true);
    await form.getByLabel('After a visitor has waited (minutes)').fill('20');
    await save.click();
    await form.getByRole('status').getByText('Saved.').waitFor();
    expect(await save.isDisabled()).toBe(true);
    await form.getByLabel(siteName).selectOption('none');
    // "No emails" has no waiting time to ask.
    expect(await form.getByLabel('After a visitor has waited (minutes)').count()).toBe(0);
    await save.click();
    await form.getByRole('status').getByText('Saved.').waitFor();
    await checkPage(page, 'account-alerts');
    const saved = await page.evaluate(async (siteId) => (await (await fetch(`/manage/v1/sites/${siteId}/me/alerts`)).json()).data, d.site.id);
    expect(saved).toEqual({ mode: 'none', waitMinutes: 20 });
    await page.context().close();
  });
});
