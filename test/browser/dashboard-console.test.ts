/**
 * A page a person loads without trouble shows zero console errors and makes no failed request, in
 * Chromium against the real service (issue 24, item 7). A failed fetch logs a console error in
 * Chromium whatever the code does, so the API answers 200 for the normal states: `GET /session`
 * when signed out (`data: null`), the event address when none is set (`data: null`). Every page is
 * loaded afresh (a reload, as a person opening a link) in the normal states: signed out; signed in
 * as an owner and as an agent; a site with no event address and an empty inbox, then with a
 * conversation. The recorder is first proven to hear an error caused on purpose.
 */
import type { BrowserContext, Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { waitFor } from '../helpers/wait';
import { DashboardHarness, dashboardHarness, Person, recordProblems } from './dashboard/harness';

describeInChromium('zero console errors on the dashboard’s pages in their normal states (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  const site = (page: string) => `/sites/${d.site.id}/${page}`;
  const OWNER_PAGES = ['inbox', 'keys', 'events', 'settings', 'team', 'timeline'];

  /**
   * Loads `pathBelow` in a new tab of `ctx` and waits until it has settled: nothing shows
   * "Loading…", no call is in flight (the live stream aside, which stays open), and on a site's
   * page the stream is live and the header has counted the unread (it counts 400 ms after the
   * page mounts). Answers what went wrong meanwhile.
   */
  async function load(ctx: BrowserContext, pathBelow: string, settled: (page: Page) => Promise<unknown>): Promise<{ page: Page; problems: string[] }> {
    const page = await ctx.newPage();
    const problems = recordProblems(page);
    let inFlight = 0;
    const counted = (url: string) => new URL(url).pathname.startsWith('/manage/') && !url.endsWith('/inbox/events');
    page.on('request', (r) => counted(r.url()) && inFlight++);
    page.on('requestfinished', (r) => counted(r.url()) && inFlight--);
    page.on('requestfailed', (r) => counted(r.url()) && inFlight--);
    const counts =
      settled === sitePage
        ? page.waitForResponse((r) => new URL(r.url()).searchParams.get('unread') === 'true' && new URL(r.url()).searchParams.get('limit') === '100')
        : Promise.resolve();
    await page.goto(`${d.origin}/dashboard${pathBelow}`);
    await settled(page);
    await counts;
    await page.waitForFunction(() => !document.querySelector('.loading'));
    await page.waitForFunction(() => true); // one more turn for answers that were being read
    await waitFor(`the calls of ${pathBelow} to finish`, () => inFlight === 0);
    return { page, problems };
  }

  const signInPage = (page: Page) => page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const signedInPage = (page: Page) => page.getByRole('button', { name: 'Sign out' }).waitFor();
  const sitePage = async (page: Page) => {
    await signedInPage(page);
    await page.locator('header .connection').filter({ hasText: 'Live' }).waitFor();
  };

  /** A browser profile signed in as `who`, through the sign-in page (that load is checked too). */
  async function signedInProfile(who: Person): Promise<BrowserContext> {
    const ctx = await d.newContext();
    const { page, problems } = await load(ctx, '/', signInPage);
    await d.signIn(page, who.email);
    await sitePage(page);
    expect(problems).toEqual([]);
    await page.close();
    return ctx;
  }

  test('the recorder hears what it must: a failed request and the console error Chromium logs for it', async () => {
    const ctx = await d.newContext();
    const { page, problems } = await load(ctx, '/', signInPage);
    expect(problems).toEqual([]);
    // On purpose: the account of a signed-out browser (401), and an asset that does not exist (404).
    await page.evaluate(() => fetch('/manage/v1/me'));
    await page.evaluate(() => fetch('/dashboard/assets/0000000000000000000a.js'));
    await waitFor('the two failures and their console errors', () => problems.length >= 4);
    expect(problems).toEqual(
      expect.arrayContaining([
        '401 GET /manage/v1/me',
        '404 GET /dashboard/assets/0000000000000000000a.js',
        expect.stringMatching(/^console: Failed to load resource: .*401/),
        expect.stringMatching(/^console: Failed to load resource: .*404/),
      ]),
    );
    await ctx.close();
  });

  test('signed out: the sign-in page at any address, and an invitation link', async () => {
    const ctx = await d.newContext();
    for (const path of ['/', site('inbox'), site('events'), '/account']) {
      const { page, problems } = await load(ctx, path, signInPage);
      expect({ path, problems }).toEqual({ path, problems: [] });
      await page.close();
    }
    const owner = d.h.runtime.services.accounts;
    const made = await owner.invitations.create(
      { manager: { accountId: d.owner.id, email: d.owner.email, via: 'session' }, clientIp: null },
      d.site.id,
      'invited@example.com',
      'agent',
    );
    const { page, problems } = await load(ctx, `/accept-invitation#token=${made.token}`, (p) =>
      p.getByRole('heading', { name: 'Accept an invitation' }).waitFor(),
    );
    expect(await page.getByLabel('Email').count()).toBe(1);
    expect(problems).toEqual([]);
    await ctx.close();
  });

  test('an owner: every page of a site with an empty inbox and no event address, and the account page', async () => {
    const ctx = await signedInProfile(d.owner);
    for (const name of OWNER_PAGES) {
      const { page, problems } = await load(ctx, site(name), sitePage);
      expect({ name, problems }).toEqual({ name, problems: [] });
      if (name === 'inbox') await page.getByText('No conversations here.').waitFor();
      if (name === 'events') await page.getByText('No event address yet.').waitFor();
      await page.close();
    }
    const { page, problems } = await load(ctx, '/account', signedInPage);
    expect(problems).toEqual([]);
    await page.close();
    await ctx.close();
  });

  test('an owner and an agent with a conversation: the inbox, the conversation, its timeline; an agent at an owners’ page', async () => {
    const conv = (await d.h.visitorSay(d.site.id, 'console-visitor', 'Hello, is anyone there?')).conversation.id as string;
    for (const who of [d.owner, d.agent]) {
      const ctx = await signedInProfile(who);
      for (const path of [site('inbox'), `${site('inbox')}?conversation=${conv}`, `${site('timeline')}?conversation=${conv}`, site('events'), '/account']) {
        const { page, problems } = await load(ctx, path, path === '/account' ? signedInPage : sitePage);
        expect({ who: who.email, path, problems }).toEqual({ who: who.email, path, problems: [] });
        if (path.includes('conversation=')) await page.getByText('Hello, is anyone there?').first().waitFor();
        if (who === d.agent && path === site('events')) await page.getByText('Owners only.').waitFor();
        await page.close();
      }
      await ctx.close();
    }
  });
});
