/**
 * The first-start setup link in Chromium: a service with no account prints
 * `/dashboard/setup#token=...`; the page takes the token from the fragment (and drops it from the
 * address bar), makes the first owner, signs them in and opens their site. A second use of the same
 * link is refused in the page.
 */
import { describeInChromium } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, screenshot, seriousAxeFindings, violations } from './dashboard/harness';

describeInChromium('the setup page in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
    // The harness makes people; a first start has none. Without them the service issues links again.
    const db = d.h.runtime.db;
    for (const table of ['sessions', 'management_tokens', 'memberships', 'accounts']) await db(table).del();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  test('the first owner is made from the link and lands in the site; the link works once', async () => {
    const link = await d.h.runtime.services.accounts.setup.issueLink();
    expect(link).not.toBeNull();
    const url = link!.url;
    expect(url.startsWith(`${d.origin}/dashboard/setup#token=`)).toBe(true);
    const token = url.split('#token=')[1];

    const page = await (await d.newContext()).newPage();
    await page.goto(url);
    await page.getByRole('heading', { name: 'Set up the service' }).waitFor();
    expect(page.url()).not.toContain(token);
    await page.getByLabel('Email').fill('first@example.com');
    await page.getByLabel('Password').fill('the first owner password');
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'setup');
    await page.getByRole('button', { name: 'Create the owner account' }).click();
    await page.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    expect(page.url()).toBe(`${d.origin}/dashboard/sites/${d.site.id}/inbox`);
    await page.getByText('first@example.com').waitFor();
    const owners = await d.h.runtime.db('memberships').where({ site_id: d.site.id, role: 'owner' });
    expect(owners).toHaveLength(1);
    await page.context().close();

    // The same link again, in another profile: refused in the page, no second account.
    const again = await (await d.newContext()).newPage();
    await again.goto(url);
    await again.getByLabel('Email').fill('second@example.com');
    await again.getByLabel('Password').fill('the second owner password');
    await again.getByRole('button', { name: 'Create the owner account' }).click();
    await again
      .getByRole('alert')
      .getByText(/does not exist, was used/)
      .waitFor();
    expect(await d.h.runtime.db('accounts').where({ email: 'second@example.com' })).toHaveLength(0);
    await again.context().close();
  });

  test('a link without its token says what to do instead of calling the service', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/setup`);
    await page.getByText('This link has no setup token in it.').waitFor();
    await page.getByText('npm run admin -- setup link').waitFor();
    await page.context().close();
  });

  test('no page error', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
