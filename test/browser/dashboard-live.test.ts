/**
 * The dashboard's live updates and notifications in Chromium against the real service over HTTPS,
 * through a TCP proxy that cuts, refuses and silences connections (dashboard/cut-proxy.ts): a
 * visitor's message reaches an open dashboard live (latency printed); a cut while messages are
 * sent is caught up with no reload, no duplicate and no burst of notifications; a silent stream is
 * replaced by the watchdog; two tabs share one stream and the other takes over when the leader
 * closes; a 401 on the stream opens the sign-in dialog; a tab without Web Locks keeps its own
 * stream. The watchdog's timings are shortened for the test through the page's test hooks.
 */
import type { BrowserContext, Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, Person, provokeViolation, screenshot, seriousAxeFindings, violations } from './dashboard/harness';
import { CutProxy, cutProxy } from './dashboard/cut-proxy';
import { waitFor } from '../helpers/wait';
import { createStreamRegistry } from '../../server/window/streams';
import { openRuntime } from '../../server/runtime';
import { listenHttps } from '../helpers/harness';
import { testApp } from '../helpers/test-app';
import { TEST_HASHER } from '../manage/helpers';

interface LiveEvent {
  id: string;
  name: string;
  data: { message?: { content?: string } };
  replayed: boolean;
}

const WATCHDOG_MS = 3_000;

describeInChromium('live updates and notifications in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  let proxy: CutProxy;
  let origin: string;
  let visitors = 0;
  beforeAll(async () => {
    d = await dashboardHarness();
    proxy = await cutProxy(Number(new URL(d.origin).port));
    origin = `https://localhost:${proxy.port}`;
    // Pings every second instead of 15 s, so the page's watchdog can be 3 s instead of 40 s (the same ratio).
    d.h.runtime.services.inbox.streams = createStreamRegistry({ heartbeatMs: 1_000 });
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await d?.close();
  });

  const inboxPath = () => `/dashboard/sites/${d.site.id}/inbox`;
  const streams = () => d.h.runtime.services.inbox.streams.count();

  /** A profile whose pages record delivered events and Notification constructions, with short watchdog timings. */
  async function liveContext(opts: { noLocks?: boolean } = {}): Promise<BrowserContext> {
    const ctx = await d.newContext();
    await ctx.grantPermissions(['notifications'], { origin });
    await ctx.addInitScript(
      ({ watchdogMs, noLocks }) => {
        const w = window as unknown as Record<string, unknown>;
        w.__dashboardLive = { watchdogMs, tickMs: 250, events: [] };
        const shown: string[] = [];
        w.__notifications = shown;
        const Real = window.Notification;
        window.Notification = class extends Real {
          constructor(title: string, options?: NotificationOptions) {
            super(title, options);
            shown.push(title);
          }
        } as typeof Notification;
        // Beeps counted: each is one oscillator.
        w.__beeps = 0;
        const osc = AudioContext.prototype.createOscillator;
        AudioContext.prototype.createOscillator = function (this: AudioContext) {
          (w.__beeps as number)++;
          return osc.call(this);
        };
        // The page behaves as a hidden tab when the test says so.
        Object.defineProperty(document, 'visibilityState', { get: () => (w.__hidden ? 'hidden' : 'visible') });
        if (noLocks)
          Object.defineProperty(navigator, 'locks', {
            value: { request: () => Promise.reject(new DOMException('The request was denied.', 'SecurityError')) },
          });
      },
      { watchdogMs: WATCHDOG_MS, noLocks: !!opts.noLocks },
    );
    return ctx;
  }

  async function signIn(page: Page, who: Person) {
    const form = page.getByRole('form', { name: 'Sign in' }).last();
    await form.getByLabel('Email').fill(who.email);
    await form.getByLabel('Password').fill('correct horse battery staple');
    await form.getByRole('button', { name: 'Sign in' }).click();
  }

  async function openInbox(ctx: BrowserContext, who: Person | null): Promise<Page> {
    const page = await ctx.newPage();
    await page.goto(`${origin}${inboxPath()}`);
    if (who) await signIn(page, who);
    await state(page).filter({ hasText: 'Live' }).waitFor();
    return page;
  }

  const state = (page: Page) => page.locator('header .connection');
  const events = (page: Page): Promise<LiveEvent[]> =>
    page.evaluate(() => (window as unknown as { __dashboardLive: { events: LiveEvent[] } }).__dashboardLive.events);
  const notifications = (page: Page): Promise<string[]> => page.evaluate(() => (window as unknown as { __notifications: string[] }).__notifications);
  const contents = async (page: Page) => (await events(page)).filter((e) => e.name === 'message.created').map((e) => e.data.message?.content);
  const waitForContent = (page: Page, content: string, timeout = 10_000) =>
    page.waitForFunction(
      (c) => (window as unknown as { __dashboardLive: { events: LiveEvent[] } }).__dashboardLive.events.some((e) => e.data.message?.content === c),
      content,
      { timeout, polling: 20 },
    );
  const beeps = (page: Page): Promise<number> => page.evaluate(() => (window as unknown as { __beeps: number }).__beeps);
  const say = (visitor: string, content: string) => d.h.visitorSay(d.site.id, visitor, content);
  const newVisitor = () => `live-visitor-${++visitors}`;

  /** Each id once, in increasing order. */
  async function expectOrderedOnce(page: Page) {
    const ids = (await events(page)).map((e) => Number(e.id));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  }

  let ctx: BrowserContext;
  let page: Page;

  test('a visitor message reaches an open dashboard live: title count, one desktop notification while hidden, CSP and axe clean', async () => {
    ctx = await liveContext();
    page = await openInbox(ctx, d.owner);
    expect(streams()).toBe(1);
    // Desktop notifications switched on by a click (permission granted to the profile).
    await page.getByText('Notifications', { exact: true }).click();
    await page.getByLabel('Desktop notifications while this tab is hidden').check();
    expect(await beeps(page)).toBe(0);
    await page.getByLabel('Play a sound').check();
    expect(await beeps(page)).toBe(1); // the click's preview
    expect(await page.getByLabel('Desktop notifications while this tab is hidden').isChecked()).toBe(true);
    expect(await violations(page)).toEqual([]);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'live-settings');
    // At a phone's width the header wraps and the settings panel stays on the screen.
    await page.setViewportSize({ width: 375, height: 720 });
    const panel = await page.locator('.live-settings-panel').boundingBox();
    expect(panel!.x).toBeGreaterThanOrEqual(0);
    expect(panel!.x + panel!.width).toBeLessThanOrEqual(375);
    expect(await seriousAxeFindings(page)).toEqual([]);
    await screenshot(page, 'live-settings-phone');
    await page.setViewportSize({ width: 1280, height: 720 });
    await page.getByText('Notifications', { exact: true }).click();

    await page.evaluate(() => ((window as unknown as { __hidden: boolean }).__hidden = true));
    const loadedAt = await page.evaluate(() => performance.timeOrigin);
    const visitor = newVisitor();
    const sent = Date.now();
    await say(visitor, 'hello, is anyone there?');
    await waitForContent(page, 'hello, is anyone there?'); // a 10 s liveness bound
    console.log(`visitor message to the open dashboard: ${Date.now() - sent} ms`);
    // Live is told by the path, not the speed: the same document, the one stream, and an event of that
    // stream rather than a catch-up after a reconnect. That the server's notice (not its poll or a
    // heartbeat) wakes the stream is counted in test/manage/inbox-live.test.ts.
    const mine = (await events(page)).find((e) => e.data.message?.content === 'hello, is anyone there?')!;
    expect(mine.replayed).toBe(false);
    expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt);
    expect(streams()).toBe(1);
    await page.waitForFunction(() => document.title.startsWith('(1) '));
    expect(await page.title()).toMatch(/^\(1\) Inbox · /);
    await page.waitForFunction(() => (window as unknown as { __notifications: string[] }).__notifications.length === 1);
    expect(await notifications(page)).toEqual(['New message from a visitor']);
    expect(await beeps(page)).toBe(2);

    // The member's own reply is no notification; a navigation keeps the count in front of the new title.
    const conv = (await d.h.runtime.db('conversations').where({ site_id: d.site.id, visitor_id: visitor }).first('id')).id as string;
    const reply = await page.evaluate(
      async ([site, c]) =>
        (
          await fetch(`/manage/v1/sites/${site}/inbox/conversations/${c}/messages`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ content: 'a reply from the team' }),
          })
        ).status,
      [d.site.id, conv],
    );
    expect(reply).toBe(201);
    await waitForContent(page, 'a reply from the team');
    await page.waitForFunction(() => !/^\(\d+\) /.test(document.title)); // the reply marked it read
    await say(visitor, 'one more thing');
    await page.waitForFunction(() => document.title.startsWith('(1) '));
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.waitForFunction(() => /^\(1\) Keys · /.test(document.title));
    expect(await notifications(page)).toEqual(['New message from a visitor', 'New message from a visitor']);
    await expectOrderedOnce(page);
    expect(await violations(page)).toEqual([]);
    expect((await provokeViolation(page)).join()).toMatch(/style-src/);
  });

  test('a cut while messages are sent: reconnecting, then live with a catch-up count, no reload, no duplicate, one summary notification', async () => {
    const loadedAt = await page.evaluate(() => performance.timeOrigin);
    const before = (await events(page)).length;
    const visitor = newVisitor();
    const shownLive = (await notifications(page)).length;
    await say(visitor, 'before the cut');
    await waitForContent(page, 'before the cut');
    await page.waitForFunction((n) => (window as unknown as { __notifications: string[] }).__notifications.length > n, shownLive);
    const shownBefore = shownLive + 1;
    const beepsBefore = await beeps(page);

    proxy.down = true;
    proxy.cut();
    await state(page)
      .filter({ hasText: /Reconnecting|Offline/ })
      .waitFor();
    for (const text of ['while away 1', 'while away 2', 'while away 3']) await say(visitor, text);
    await new Promise((r) => setTimeout(r, 1_500)); // the page retries against a refused address meanwhile
    proxy.down = false;
    await page.evaluate(() => dispatchEvent(new Event('online'))); // the network is back
    await state(page).filter({ hasText: 'Live' }).waitFor();
    await waitForContent(page, 'while away 3');
    await page.getByText('3 updates while offline').waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'updates while offline' }).innerText()).toMatch(/Live · 3 updates while offline/);

    const caught = (await events(page)).slice(before);
    // A visitor's first message is message.created then conversation.started, both live; the rest is the catch-up.
    expect(caught.map((e) => [e.name, e.data.message?.content ?? null, e.replayed])).toEqual([
      ['message.created', 'before the cut', false],
      ['conversation.started', 'before the cut', false],
      ['message.created', 'while away 1', true],
      ['message.created', 'while away 2', true],
      ['message.created', 'while away 3', true],
    ]);
    expect(caught.filter((e) => e.replayed).map((e) => e.data.message?.content)).toEqual(['while away 1', 'while away 2', 'while away 3']);
    await expectOrderedOnce(page);
    // One summary for the backlog, never one per message.
    await page.waitForFunction((n) => (window as unknown as { __notifications: string[] }).__notifications.length > n, shownBefore);
    await new Promise((r) => setTimeout(r, 1_200));
    expect((await notifications(page)).slice(shownBefore)).toEqual(['3 new messages']);
    expect(await beeps(page)).toBe(beepsBefore); // a catch-up never sounds
    // The same document: no reload happened.
    expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt);
    await screenshot(page, 'live-caught-up');
  });

  test('a 503 (the service at its total of streams) is retried after Retry-After, not in a loop', async () => {
    const saved = d.h.runtime.services.inbox.streams;
    d.h.runtime.services.inbox.streams = createStreamRegistry({ heartbeatMs: 1_000, total: 0 });
    const answers: number[] = [];
    const count = (r: import('playwright-core').Response) => r.url().endsWith('/inbox/events') && answers.push(r.status());
    page.on('response', count);
    try {
      proxy.cut();
      await waitFor('a 503', () => answers.includes(503), 5_000);
      await new Promise((r) => setTimeout(r, 3_000)); // backoff alone would have tried twice more by now
      expect(answers).toEqual([503]);
      expect(await state(page).innerText()).toMatch(/Reconnecting/);
    } finally {
      saved.closeAll();
      d.h.runtime.services.inbox.streams = createStreamRegistry({ heartbeatMs: 1_000 });
    }
    await page.evaluate(() => dispatchEvent(new Event('online')));
    await state(page).filter({ hasText: 'Live' }).waitFor();
    page.off('response', count);
    expect(answers.at(-1)).toBe(200);
  });

  test('a stream gone silent (a proxy that stops forwarding) is replaced by the watchdog', async () => {
    const visitor = newVisitor();
    const accepted = proxy.accepted;
    proxy.freeze();
    const frozenAt = Date.now();
    await say(visitor, 'sent into the silence');
    // A liveness bound below the page's other ways out of a silence: its default 40 s watchdog and the
    // 20 s after a sleep. A page that ignored the 3 s it was given would not make it.
    await waitForContent(page, 'sent into the silence', 15_000);
    const replaced = Date.now() - frozenAt;
    console.log(`silent stream replaced and caught up after ${replaced} ms (watchdog ${WATCHDOG_MS} ms)`);
    // The silence is counted from the last byte (a ping, up to 1 s before the freeze): not before it.
    expect(replaced).toBeGreaterThanOrEqual(WATCHDOG_MS - 1_200);
    expect(proxy.accepted).toBeGreaterThan(accepted);
    await state(page).filter({ hasText: 'Live' }).waitFor();
    expect((await contents(page)).filter((c) => c === 'sent into the silence')).toHaveLength(1);
    await expectOrderedOnce(page);
    await ctx.close();
  });

  test('a restart (another process on the same database takes the address): the page resumes there by itself, then a purge gap asks for a resync', async () => {
    const c = await liveContext();
    const page = await openInbox(c, d.owner);
    const visitor = newVisitor();
    await say(visitor, 'before the restart');
    await waitForContent(page, 'before the restart');
    const before = (await events(page)).length;

    proxy.down = true;
    proxy.cut();
    await say(visitor, 'during the restart 1');
    await say(visitor, 'during the restart 2');
    const next = await openRuntime(d.h.config, { passwordHasher: TEST_HASHER });
    next.services.inbox.streams = createStreamRegistry({ heartbeatMs: 1_000 });
    const server = await listenHttps(testApp(next.services));
    proxy.target = Number(new URL(server.url).port);
    proxy.down = false;
    try {
      // No help from the test: the page's own backoff finds the new process.
      await waitForContent(page, 'during the restart 2', 15_000);
      await state(page).filter({ hasText: 'Live' }).waitFor();
      expect(next.services.inbox.streams.count()).toBe(1);
      const caught = (await events(page)).slice(before);
      expect(caught.map((e) => [e.data.message?.content, e.replayed])).toEqual([
        ['during the restart 1', true],
        ['during the restart 2', true],
      ]);
      await page.getByText('2 updates while offline').waitFor();
      await expectOrderedOnce(page);
    } finally {
      proxy.target = Number(new URL(d.origin).port);
      proxy.cut();
      await server.close();
      await next.close();
    }

    // Back on the first process, with the feed purged past the page's last id: the page is told to reload its lists.
    await state(page).filter({ hasText: 'Live' }).waitFor({ timeout: 15_000 });
    const last = Math.max(...(await events(page)).map((e) => Number(e.id)));
    proxy.down = true;
    proxy.cut();
    await say(visitor, 'purged before it was read');
    await say(visitor, 'after the purge');
    await d.h.runtime
      .db('inbox_activity')
      .where({ site_id: d.site.id, position: last + 1 })
      .del();
    proxy.down = false;
    await page.evaluate(() => dispatchEvent(new Event('online')));
    await waitForContent(page, 'after the purge');
    expect(await page.evaluate(() => (window as unknown as { __dashboardLive: { resyncs?: number } }).__dashboardLive.resyncs)).toBe(1);
    expect(await contents(page)).not.toContain('purged before it was read');
    await c.close();
  });

  test('two tabs share one stream; both get each event; closing the leader hands the stream to the other', async () => {
    const two = await liveContext();
    const first = await openInbox(two, d.agent);
    const second = await openInbox(two, null); // the same profile: signed in already
    await waitFor('one stream on the server', () => streams() === 1, 5_000);
    const roles = async () =>
      Promise.all(
        [first, second].map((p) =>
          p.evaluate((s) => (window as unknown as { __dashboardLive: { role: Record<string, string> } }).__dashboardLive.role?.[s], d.site.id),
        ),
      );
    expect((await roles()).sort()).toEqual(['leader', 'waiting']);
    const [leader, other] = (await roles())[0] === 'leader' ? [first, second] : [second, first];

    // Desktop notifications on (the setting is the profile's), both tabs hidden: only the tab reading the stream notifies.
    await other.getByText('Notifications', { exact: true }).click();
    await other.getByLabel('Desktop notifications while this tab is hidden').check();
    await other.getByText('Notifications', { exact: true }).click();
    for (const p of [leader, other]) await p.evaluate(() => ((window as unknown as { __hidden: boolean }).__hidden = true));
    const visitor = newVisitor();
    await say(visitor, 'seen by both tabs');
    await Promise.all([waitForContent(leader, 'seen by both tabs'), waitForContent(other, 'seen by both tabs')]);
    await leader.waitForFunction(() => (window as unknown as { __notifications: string[] }).__notifications.length === 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(await notifications(other)).toEqual([]);
    expect(await state(other).innerText()).toBe('Live');

    await leader.close();
    await other.waitForFunction(
      (s) => (window as unknown as { __dashboardLive: { role: Record<string, string> } }).__dashboardLive.role?.[s] === 'leader',
      d.site.id,
    );
    await say(visitor, 'after the takeover');
    await waitForContent(other, 'after the takeover');
    await waitFor('one stream on the server', () => streams() === 1, 5_000);
    expect((await contents(other)).filter((c) => c === 'seen by both tabs' || c === 'after the takeover')).toEqual(['seen by both tabs', 'after the takeover']);
    await expectOrderedOnce(other);
    expect(await violations(other)).toEqual([]);
    expect(await seriousAxeFindings(other)).toEqual([]);
    await two.close();
  });

  test('without Web Locks (storage refused) each tab keeps its own stream and still gets events', async () => {
    const solo = await liveContext({ noLocks: true });
    const page = await openInbox(solo, d.agent);
    const visitor = newVisitor();
    await say(visitor, 'to a tab without locks');
    await waitForContent(page, 'to a tab without locks');
    expect(await page.evaluate((s) => (window as unknown as { __dashboardLive: { role: Record<string, string> } }).__dashboardLive.role?.[s], d.site.id)).toBe(
      'solo',
    );
    await solo.close();
  });

  test('a 401 on the stream (the session deleted) opens the sign-in dialog; signed in, the stream resumes', async () => {
    const c = await liveContext();
    const log: string[] = [];
    c.on(
      'request',
      (r) =>
        r.url().includes('/manage/') && log.push(`${Date.now() % 100000} > ${r.method()} ${r.url().split('/v1')[1]} ${r.headers()['last-event-id'] ?? ''}`),
    );
    c.on('response', (r) => r.url().includes('/manage/') && log.push(`${Date.now() % 100000} < ${r.status()} ${r.url().split('/v1')[1]}`));
    c.on('requestfailed', (r) => r.url().includes('/manage/') && log.push(`${Date.now() % 100000} x ${r.url().split('/v1')[1]} ${r.failure()?.errorText}`));
    const page = await openInbox(c, d.agent);
    await d.h.runtime.db('sessions').where({ account_id: d.agent.id }).del();
    proxy.cut();
    const dialog = page.getByRole('dialog', { name: 'Your session ended' });
    await dialog.waitFor();
    const visitor = newVisitor();
    await say(visitor, 'while signing in again');
    await signIn(page, d.agent);
    await dialog.waitFor({ state: 'detached' });
    await waitForContent(page, 'while signing in again').catch(async (err) => {
      console.log(log.join('\n'), await state(page).innerText(), JSON.stringify(await events(page)));
      throw err;
    });
    await state(page).filter({ hasText: 'Live' }).waitFor();
    expect(await violations(page)).toEqual([]);
    await c.close();
  });
});
