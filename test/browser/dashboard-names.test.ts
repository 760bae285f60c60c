/**
 * Names, sites and times in the dashboard, in Chromium against the real service over HTTPS: an
 * account with no site is offered to create one and becomes its owner; an account sets its
 * display name, which the team list shows; an owner chooses whose name visitors see; every time
 * shown carries the exact time on hover, and times more than a week old read as dates. Every page
 * visited: no CSP violation, axe clean, a screenshot in test-artifacts/dashboard/.
 */
import { describeInChromium } from '../helpers/chromium';
import { newAccount } from '../manage/helpers';
import { DashboardHarness, dashboardHarness, checkPage } from './dashboard/harness';

describeInChromium('names, new sites and times in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  test('an account with no site is told so and creates one, becoming its owner on its settings page', async () => {
    await newAccount(d.h, 'founder@example.com');
    const page = await d.signedIn({ id: '', email: 'founder@example.com' }, '/');
    await page.getByText('You are not a member of any site yet.').waitFor();
    expect(await page.getByText('Ask an owner of a site to invite you').count()).toBe(0);
    await checkPage(page, 'new-site-empty-account');
    const form = page.getByRole('form', { name: 'Create a site' });
    await form.getByLabel('Site name').fill('  Acme shop  ');
    await form.getByRole('button', { name: 'Create site' }).click();
    await page.getByRole('heading', { name: 'Allowed origins' }).waitFor();
    expect(new URL(page.url()).pathname).toMatch(/^\/dashboard\/sites\/ws_[0-9a-z]{26}\/settings$/);
    expect(await page.getByLabel('Site').locator('option:checked').innerText()).toBe('Acme shop (owner)');
    await checkPage(page);

    const me = await page.evaluate(async () => (await (await fetch('/manage/v1/me')).json()).data);
    expect(me.sites).toEqual([expect.objectContaining({ name: 'Acme shop', role: 'owner' })]);
    // With a site, another is made at /new-site (the header's "New site").
    await page.getByRole('link', { name: 'New site' }).click();
    await page.getByRole('form', { name: 'Create a site' }).waitFor();
    expect(await page.getByText('You are not a member of any site yet.').count()).toBe(0);
    await page.context().close();
  });

  test('an account sets its display name; the team list shows it; clearing it shows the email’s local part', async () => {
    const page = await d.signedIn(d.agent, '/account');
    const form = page.getByRole('form', { name: 'Your name' });
    await form.getByLabel('Display name').fill('  Anna from Support ');
    await form.getByRole('button', { name: 'Save name' }).click();
    await form.getByText('Saved: you show as “Anna from Support”.').waitFor();
    await checkPage(page, 'account-display-name');
    await page.context().close();

    const owner = await d.signedIn(d.owner, `/sites/${d.site.id}/team`);
    const members = owner.getByRole('table', { name: 'Members of the site' });
    await members.getByText('Anna from Support').waitFor();
    expect(await members.getByRole('row', { name: /Anna from Support/ }).innerText()).toContain('agent@example.com');
    await checkPage(owner);
    await owner.context().close();

    const again = await d.signedIn(d.agent, '/account');
    const field = again.getByRole('form', { name: 'Your name' }).getByLabel('Display name');
    expect(await field.inputValue()).toBe('Anna from Support');
    await field.fill('');
    await again.getByRole('button', { name: 'Save name' }).click();
    await again.getByText('Cleared: you show as “agent”.').waitFor();
    await again.context().close();
  });

  test('an owner chooses whose name visitors see on replies: each agent’s, or the site’s', async () => {
    const page = await d.signedIn(d.owner, `/sites/${d.site.id}/settings`);
    const section = page.getByRole('region', { name: 'Who visitors see answering' });
    const siteName = (await d.h.runtime.services.access.getSite(d.site.id)).name;
    await section.getByLabel(`The site’s name, “${siteName}”, on every reply`).check();
    await section.getByRole('button', { name: 'Save' }).click();
    await section.getByText('Saved.').waitFor();
    expect(await d.h.runtime.services.access.agentNames(d.site.id)).toEqual({ shown: false });
    await checkPage(page, 'settings-agent-names');
    await page.reload();
    expect(
      await page
        .getByRole('region', { name: 'Who visitors see answering' })
        .getByRole('radio', { name: /The site’s name/ })
        .isChecked(),
    ).toBe(true);
    await page
      .getByRole('region', { name: 'Who visitors see answering' })
      .getByLabel(/Each agent’s name/)
      .check();
    await page.getByRole('region', { name: 'Who visitors see answering' }).getByRole('button', { name: 'Save' }).click();
    await page.getByRole('region', { name: 'Who visitors see answering' }).getByText('Saved.').waitFor();
    expect(await d.h.runtime.services.access.agentNames(d.site.id)).toEqual({ shown: true });
    await page.context().close();
  });

  test('every time shown has its exact time on hover; one more than a week old reads as a date', async () => {
    const key = await d.h.newKey(d.site.id, ['conversations:read']);
    const fortyDaysAgo = Date.now() - 40 * 86_400_000;
    await d.h.runtime.db('api_keys').where({ id: key.id }).update({ created_at: fortyDaysAgo });
    await d.h.visitorSay(d.site.id, 'hover-visitor', 'Hello');

    const page = await d.signedIn(d.owner, `/sites/${d.site.id}/keys`);
    const table = page.getByRole('table', { name: 'Access keys of the public API' });
    const old = table.locator(`time[datetime="${new Date(fortyDaysAgo).toISOString()}"]`);
    await old.waitFor();
    const shown = await old.innerText();
    expect(shown).not.toMatch(/ago|week|month/);
    expect(shown).toMatch(/\d/);
    expect(await old.getAttribute('title')).toContain(String(new Date(fortyDaysAgo).getFullYear()));
    await checkPage(page);

    // Every <time> of the pages with times (keys, inbox, team, account) has a title with the exact time.
    for (const path of [`/sites/${d.site.id}/keys`, `/sites/${d.site.id}/inbox`, `/sites/${d.site.id}/team`, '/account']) {
      await page.goto(`${d.origin}/dashboard${path}`);
      await page.locator('main time').first().waitFor();
      const times = await page
        .locator('main time')
        .evaluateAll((els) => els.map((e) => ({ at: e.getAttribute('datetime'), title: e.getAttribute('title') ?? '' })));
      expect(times.length).toBeGreaterThan(0);
      for (const t of times) expect([path, t.at, t.title]).toEqual([path, expect.any(String), expect.stringMatching(/\d{4}.*\d{1,2}:\d{2}/)]);
    }
    await page.context().close();
  });
});
