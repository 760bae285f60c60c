/**
 * The inbox in Chromium against the real service over HTTPS: an agent sees what visitors wrote,
 * opens a conversation whose older history loads only as it scrolls up, replies with markdown and
 * files (the public API shows the reply as origin `messenger` with the agent's authorId), a retry
 * after a dropped answer posts once, a draft survives a switch of conversation and a session that
 * ends, close, assign, the filters, the list's paging, live updates through the stand-in stream,
 * keyboard-only use, shared replies (and the import of a browser's old ones) and a phone-width layout. Every state visited is CSP clean and
 * axe clean; screenshots go to test-artifacts/dashboard/ (inbox.png, inbox-phone.png and others).
 */
import request from 'supertest';
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { waitFor } from '../helpers/wait';
import { friendlyName } from '../../server/visitors/display-name';
import { DashboardHarness, dashboardHarness, PASSWORD, violations, checkPage } from './dashboard/harness';

describeInChromium('the inbox in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    // One agent walks fifteen scenarios in under a minute (sign-ins, reloads, several tabs): more than
    // the default 300 calls a minute a person makes. The limit itself is tested in test/api/rate-limit.
    d = await dashboardHarness({ env: { RATE_LIMIT_PER_MINUTE: '1000' } });
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });

  const inboxPath = (conversationId?: string) => `/sites/${d.site.id}/inbox${conversationId ? `?conversation=${conversationId}` : ''}`;
  let visitors = 0;
  /** A visitor writes through the chat window's path; answers the conversation id. */
  const say = async (visitorId: string, content: string) => (await d.h.visitorSay(d.site.id, visitorId, content)).conversation.id as string;
  const newVisitor = (name: string) => `${name}-${++visitors}`;
  const row = (page: Page, id: string) => page.locator(`.inbox-rows [data-conversation="${id}"]`);
  const history = (page: Page) => page.getByRole('log', { name: 'Messages' });
  const replyField = (page: Page) => page.getByRole('textbox', { name: 'Reply (markdown)' });
  /** The send has its answer (the live history can show the message before it). */
  const sendFinished = (page: Page) => page.waitForFunction(() => !document.querySelector('.composer [aria-busy="true"]'));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** The inbox card as the signed-in member of `page` reads it from the API. */
  const card = (page: Page, id: string) =>
    page.evaluate(async ([siteId, conv]) => (await (await fetch(`/manage/v1/sites/${siteId}/inbox/conversations/${conv}`)).json()).data, [
      d.site.id,
      id,
    ] as const) as Promise<{ state: string; assigneeId: string | null; unreadCount: number }>;
  const publicMessages = async (id: string) =>
    (await request(d.h.app).get(`/api/v1/conversations/${id}/messages?limit=100`).set('Authorization', `Bearer ${d.site.key}`)).body.data as {
      id: string;
      content: string;
      origin: string;
      authorId: string | null;
      format: string;
      attachments: { name: string; size: number }[];
    }[];

  test('an agent opens a visitor’s conversation: the newest page first, older pages only as the history scrolls up, then read', async () => {
    const visitor = newVisitor('shopper');
    let conv = '';
    // More than one page (30): 45 messages, a few milliseconds apart so their order is certain.
    for (let i = 1; i <= 45; i++) {
      conv = await say(visitor, `message ${i}`);
      await sleep(3);
    }
    const page = await d.signedIn(d.agent, inboxPath());
    const r = row(page, conv);
    await r.waitFor();
    // The row names the visitor by its display name (here the friendly one), its id on hover.
    expect(await r.innerText()).toContain(friendlyName(visitor));
    expect(await r.locator('.inbox-row-visitor').getAttribute('title')).toBe(visitor);
    expect(await r.locator('.badge').innerText()).toMatch(/^45\s*unread$/);
    await r.click();
    const log = history(page);
    await log.getByText('message 45', { exact: true }).waitFor();
    // The newest page: 16 to 45; nothing older is in the page yet.
    expect(await log.getByText('message 16', { exact: true }).count()).toBe(1);
    expect(await log.getByText('message 15', { exact: true }).count()).toBe(0);
    expect(await log.getByText('message 1', { exact: true }).count()).toBe(0);
    // Opened at the bottom (the newest message in view).
    expect(await log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight)).toBeLessThan(5);
    // Opening marked it read for the agent, in the list and on the server.
    await r.locator('.badge').waitFor({ state: 'detached' });
    expect((await card(page, conv)).unreadCount).toBe(0);
    expect(new URL(page.url()).searchParams.get('conversation')).toBe(conv);
    await checkPage(page, 'inbox');

    // Scrolling up loads the previous page, and the view stays on what was on screen.
    const seen = await log.getByText('message 16', { exact: true }).boundingBox();
    await log.evaluate((el) => el.scrollTo({ top: 0 }));
    await log.getByText('message 1', { exact: true }).waitFor();
    expect(await log.locator('.msg').count()).toBe(45);
    expect(await log.getByText('The beginning of the conversation.').count()).toBe(1);
    expect(await log.evaluate((el) => el.scrollTop)).toBeGreaterThan(100); // kept its place instead of jumping to the top
    expect(seen).not.toBeNull();
    await page.context().close();
  });

  test('a reply with markdown (previewed) and files, by the picker and dropped; the public API shows origin messenger and the agent', async () => {
    const visitor = newVisitor('buyer');
    const conv = await say(visitor, 'Where is my parcel?');
    const page = await d.signedIn(d.agent, inboxPath(conv));
    await history(page).getByText('Where is my parcel?').waitFor();

    // Over the API's 10,000 characters (code points: an emoji counts once) the page says so before sending.
    await replyField(page).fill(`${'x'.repeat(9999)}😀😀`);
    await page.getByRole('alert').getByText('The reply is 1 character over the limit of 10,000.').waitFor();
    expect(await page.getByRole('button', { name: 'Send' }).isDisabled()).toBe(true);
    await replyField(page).fill('Your parcel **shipped** today: [track it](https://example.com/track)');
    await page.getByRole('button', { name: 'Preview' }).click();
    const preview = page.getByRole('region', { name: 'Preview' });
    expect(await preview.locator('strong').innerText()).toBe('shipped');
    expect(await preview.getByRole('link', { name: 'track it' }).getAttribute('href')).toBe('https://example.com/track');
    // Picked and dropped files are listed with their sizes.
    await page.locator('.composer input[type=file]').setInputFiles({ name: 'label.txt', mimeType: 'text/plain', buffer: Buffer.from('tracking 123') });
    const dropped = await page.evaluateHandle(() => {
      const t = new DataTransfer();
      t.items.add(new File(['x'.repeat(2048)], 'invoice.txt', { type: 'text/plain' }));
      return t;
    });
    await page.locator('form.composer').dispatchEvent('dragover', { dataTransfer: dropped });
    await page.locator('form.composer').dispatchEvent('drop', { dataTransfer: dropped });
    const files = page.getByRole('list', { name: 'Files to send' });
    await files.getByText('invoice.txt').waitFor();
    expect(await files.innerText()).toMatch(/label\.txt\s+12 B[\s\S]*invoice\.txt\s+2\.0 KB/);
    await checkPage(page, 'inbox-reply-preview');

    await page.getByRole('button', { name: 'Send' }).click();
    const mine = history(page).locator('.msg-outgoing');
    await mine.getByRole('link', { name: 'invoice.txt' }).waitFor();
    expect(await mine.locator('strong').innerText()).toBe('shipped');
    expect(await mine.locator('.msg-author').innerText()).toBe('You');
    await sendFinished(page);
    expect(await replyField(page).inputValue()).toBe(''); // a new, empty message
    expect(await page.getByRole('list', { name: 'Files to send' }).count()).toBe(0);

    const messages = await publicMessages(conv);
    expect(messages).toHaveLength(2);
    expect(messages[1]).toMatchObject({
      origin: 'messenger',
      authorId: d.agent.id,
      format: 'markdown',
      content: 'Your parcel **shipped** today: [track it](https://example.com/track)',
    });
    expect(messages[1].attachments.map((a) => [a.name, a.size])).toEqual([
      ['label.txt', 12],
      ['invoice.txt', 2048],
    ]);
    expect(d.pageErrors).toEqual([]);
    await page.context().close();
  });

  test('hostile text from a visitor is shown as text: no element, no script, no unsafe link', async () => {
    const hostile = '<img src=x onerror="window.__owned=1"> <script>window.__owned=2</script> [click](javascript:window.__owned=3) ' + '['.repeat(9000);
    const conv = await d.h.runtime.services.window.chat.visitorSay(d.site.id, newVisitor('hostile'), hostile, { format: 'markdown' });
    const page = await d.signedIn(d.agent, inboxPath(conv.conversation.id));
    const log = history(page);
    await log.getByText('<img src=x onerror=', { exact: false }).waitFor();
    expect(await log.locator('img, script, iframe').count()).toBe(0);
    expect(await log.getByRole('link').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).toBeUndefined();
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('a send whose answer is lost is retried with the same Idempotency-Key: one message; an error of the envelope is shown', async () => {
    const conv = await say(newVisitor('flaky'), 'Hello?');
    const page = await d.signedIn(d.agent, inboxPath(conv));
    await history(page).getByText('Hello?').waitFor();
    const keys: string[] = [];
    let drop = true;
    await page.route('**/inbox/conversations/*/messages', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      keys.push((await route.request().headerValue('idempotency-key')) ?? '');
      if (!drop) return route.continue();
      drop = false;
      await route.fetch(); // the server takes it…
      await route.abort('connectionreset'); // …and the answer never arrives
    });
    await replyField(page).fill('Sent once, whatever the network does');
    await page.getByRole('button', { name: 'Send' }).click();
    await page
      .getByRole('alert')
      .getByText(/could not be reached/)
      .waitFor();
    expect(await replyField(page).inputValue()).toBe('Sent once, whatever the network does'); // nothing lost
    // The history shows the message already (the first try reached the server, and the stream says
    // so): the retry's own answer is what tells it was sent.
    const retried = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname.endsWith('/messages'));
    await page.getByRole('button', { name: 'Send' }).click();
    await retried;
    await history(page).getByText('Sent once, whatever the network does').waitFor();
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^inbox-[0-9a-f]{32}$/);
    expect(keys[1]).toBe(keys[0]);
    expect((await publicMessages(conv)).filter((m) => m.content === 'Sent once, whatever the network does')).toHaveLength(1);
    await page.unroute('**/inbox/conversations/*/messages');

    // The next message has a key of its own.
    const next: string[] = [];
    page.on('request', (req) => req.method() === 'POST' && req.url().endsWith('/messages') && next.push(req.headers()['idempotency-key']));
    await replyField(page).fill('A second message');
    await page.keyboard.press('Control+Enter');
    await history(page).getByText('A second message').waitFor();
    await sendFinished(page); // a Ctrl+Enter while a send is in flight is not a second send
    expect(next).toHaveLength(1);
    expect(next[0]).not.toBe(keys[0]);

    // Typed while a send is in flight (its message already shows, live): the answer clears only what was sent.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/inbox/conversations/*/messages', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      const answer = await route.fetch();
      await held;
      await route.fulfill({ response: answer });
    });
    await replyField(page).fill('Sent while I type');
    await page.keyboard.press('Control+Enter');
    await history(page).getByText('Sent while I type').waitFor();
    await replyField(page).fill('The next one, typed meanwhile');
    release();
    await sendFinished(page);
    await page.unroute('**/inbox/conversations/*/messages');
    expect(await replyField(page).inputValue()).toBe('The next one, typed meanwhile');
    await page.keyboard.press('Control+Enter');
    await history(page).getByText('The next one, typed meanwhile').waitFor();
    await sendFinished(page);
    expect(next).toHaveLength(3);
    expect(new Set(next).size).toBe(3); // each message its own key
    expect(await replyField(page).inputValue()).toBe('');

    // An envelope's error, shown as it says: a file over the size limit is refused (413), the draft stays.
    const statuses: number[] = [];
    page.on('response', (res) => res.request().method() === 'POST' && res.url().endsWith('/messages') && statuses.push(res.status()));
    await replyField(page).fill('Too big');
    await page
      .locator('.composer input[type=file]')
      .setInputFiles({ name: 'huge.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(20 * 1024 * 1024 + 1) });
    await page.getByRole('button', { name: 'Send' }).click();
    await page
      .getByRole('alert')
      .getByText(/limit|too large/i)
      .waitFor();
    expect(statuses).toEqual([413]);
    expect(await replyField(page).inputValue()).toBe('Too big');
    expect(await page.getByRole('list', { name: 'Files to send' }).innerText()).toMatch(/huge\.bin\s+20 MB/);
    expect((await publicMessages(conv)).some((m) => m.content === 'Too big')).toBe(false);

    // Closed elsewhere (here through the service, as the public API would): the page learns it live.
    await d.h.runtime.services.conversations.close(d.site.id, conv);
    await page.getByText('This conversation is closed').waitFor();
    expect(await replyField(page).count()).toBe(0);
    await page.context().close();
  });

  test('a draft per conversation survives a switch and a session that ends; the reply is sent after signing in again', async () => {
    const a = await say(newVisitor('drafter-a'), 'First question');
    const b = await say(newVisitor('drafter-b'), 'Second question');
    const page = await d.signedIn(d.agent, inboxPath(a));
    await history(page).getByText('First question').waitFor();
    await replyField(page).fill('Half-typed for A');
    await row(page, b).click();
    await history(page).getByText('Second question').waitFor();
    expect(await replyField(page).inputValue()).toBe('');
    await replyField(page).fill('Something for B');
    await row(page, a).click();
    await history(page).getByText('First question').waitFor();
    expect(await replyField(page).inputValue()).toBe('Half-typed for A');

    // The session ends on the server; sending opens the sign-in dialog over the page.
    await d.h.runtime.db('sessions').where({ account_id: d.agent.id }).del();
    await replyField(page).fill('Half-typed for A, finished after the session ended');
    await page.getByRole('button', { name: 'Send' }).click();
    const dialog = page.getByRole('dialog', { name: 'Your session ended' });
    await dialog.waitFor();
    expect(await replyField(page).inputValue()).toBe('Half-typed for A, finished after the session ended');
    await dialog.getByLabel('Password').fill(PASSWORD);
    await dialog.getByRole('button', { name: 'Sign in' }).click();
    await history(page).getByText('Half-typed for A, finished after the session ended').waitFor();
    expect((await publicMessages(a)).map((m) => m.content)).toEqual(['First question', 'Half-typed for A, finished after the session ended']);
    // B's draft is still there; a reload of the tab keeps it too (sessionStorage).
    await row(page, b).click();
    await history(page).getByText('Second question').waitFor();
    expect(await replyField(page).inputValue()).toBe('Something for B');
    await page.reload();
    await history(page).getByText('Second question').waitFor();
    expect(await replyField(page).inputValue()).toBe('Something for B');
    await page.context().close();
  });

  test('assign to me, unassign, an owner assigns to a member, close with a confirmation', async () => {
    const conv = await say(newVisitor('assignee'), 'Who is on this?');
    const agentPage = await d.signedIn(d.agent, inboxPath(conv));
    await history(agentPage).getByText('Who is on this?').waitFor();
    await agentPage.getByRole('button', { name: 'Assign to me' }).click();
    await row(agentPage, conv).getByText('Assigned to you').waitFor();
    expect((await card(agentPage, conv)).assigneeId).toBe(d.agent.id);
    // An agent has no member picker (the API would refuse them anyone else).
    expect(await agentPage.getByLabel('Assign to').count()).toBe(0);
    await agentPage.getByRole('button', { name: 'Unassign' }).click();
    await row(agentPage, conv).getByText('Unassigned').waitFor();
    expect((await card(agentPage, conv)).assigneeId).toBeNull();

    const ownerPage = await d.signedIn(d.owner, inboxPath(conv));
    await history(ownerPage).getByText('Who is on this?').waitFor();
    await ownerPage.getByLabel('Assign to').selectOption({ label: d.agent.email });
    await ownerPage.getByRole('button', { name: 'Assign', exact: true }).click();
    await row(ownerPage, conv).getByText(`Assigned to ${d.agent.email}`).waitFor();
    expect((await card(ownerPage, conv)).assigneeId).toBe(d.agent.id);
    await checkPage(ownerPage);
    await ownerPage.context().close();

    // The agent's page learnt it live.
    await row(agentPage, conv).getByText('Assigned to you').waitFor();
    await agentPage.getByRole('button', { name: 'Close conversation' }).click();
    const dialog = agentPage.getByRole('dialog', { name: 'Close this conversation?' });
    await dialog.waitFor();
    await checkPage(agentPage, 'inbox-close-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await card(agentPage, conv)).state).toBe('open');
    await agentPage.getByRole('button', { name: 'Close conversation' }).click();
    await dialog.getByRole('button', { name: 'Close conversation' }).click();
    await agentPage.getByText('This conversation is closed').waitFor();
    expect(await replyField(agentPage).count()).toBe(0);
    await row(agentPage, conv).getByText('Closed').waitFor();
    expect((await card(agentPage, conv)).state).toBe('closed');
    await agentPage.context().close();
  });

  test('filters: open or closed, mine, unassigned or all, unread only', async () => {
    const free = await say(newVisitor('filter-free'), 'nobody has me');
    const taken = await say(newVisitor('filter-mine'), 'the agent has me');
    const done = await say(newVisitor('filter-closed'), 'I was closed');
    const manager = { accountId: d.agent.id, email: d.agent.email, via: 'session' as const };
    await d.h.runtime.services.inbox.service.assign({ manager, clientIp: null }, d.site.id, taken, d.agent.id, 'agent');
    await d.h.runtime.services.conversations.close(d.site.id, done);
    const page = await d.signedIn(d.agent, inboxPath());
    const ids = async () => page.locator('.inbox-rows [data-conversation]').evaluateAll((els) => els.map((e) => e.getAttribute('data-conversation')));
    await row(page, free).waitFor();
    expect(await ids()).toEqual(expect.arrayContaining([free, taken]));
    expect(await ids()).not.toContain(done);

    await page.getByLabel('State').selectOption('closed');
    await row(page, done).waitFor();
    expect(await ids()).not.toContain(free);
    await page.getByLabel('State').selectOption('open');
    await page.getByLabel('Assigned').selectOption('me');
    // `taken` is in the list being replaced too: wait for the list to be exactly the filtered one.
    await page.waitForFunction(
      (want) => JSON.stringify(Array.from(document.querySelectorAll('.inbox-rows [data-conversation]'), (e) => e.getAttribute('data-conversation'))) === want,
      JSON.stringify([taken]),
    );
    expect(await ids()).toEqual([taken]);
    await page.getByLabel('Assigned').selectOption('unassigned');
    await row(page, free).waitFor();
    expect(await ids()).not.toContain(taken);
    // Unread only: reading `free` takes it out of that list (on the next load).
    await page.getByLabel('Assigned').selectOption('any');
    await page.getByLabel('Unread only').check();
    await row(page, free).waitFor();
    await row(page, free).click();
    await row(page, free).locator('.badge').waitFor({ state: 'detached' });
    await page.getByLabel('Unread only').uncheck();
    await page.getByLabel('Unread only').check();
    await page.locator('.inbox-rows, .inbox-list .empty').first().waitFor();
    await page.waitForFunction((id) => !document.querySelector(`.inbox-rows [data-conversation="${id}"]`), free);
    await checkPage(page);
    await page.context().close();
  });

  test('search: / focuses the field, a message written a second ago is found, the search stays in the address, Esc clears it', async () => {
    const other = await say(newVisitor('search-other'), 'nothing to see');
    const page = await d.signedIn(d.agent, inboxPath());
    await row(page, other).waitFor();
    const field = page.getByRole('searchbox', { name: 'Search conversations' });
    await page.locator('body').press('/');
    expect(await field.evaluate((el) => el === document.activeElement)).toBe(true);
    const found = await say(newVisitor('search-found'), 'My PLATYPUS-shaped lamp broke');
    await field.fill('platypus lamp');
    const exactly = (want: string[]) =>
      page.waitForFunction(
        (w) => JSON.stringify(Array.from(document.querySelectorAll('.inbox-rows [data-conversation]'), (e) => e.getAttribute('data-conversation'))) === w,
        JSON.stringify(want),
      );
    await exactly([found]);
    await page.waitForFunction(() => new URLSearchParams(location.search).get('q') === 'platypus lamp');
    await page.reload();
    await exactly([found]);
    expect(await field.inputValue()).toBe('platypus lamp');
    await row(page, found).click();
    await page.waitForFunction(
      (id) => new URLSearchParams(location.search).get('conversation') === id && new URLSearchParams(location.search).get('q') === 'platypus lamp',
      found,
    );
    // A word too short to search is said so, not answered with an empty list.
    await field.fill('pl');
    await field.press('Enter');
    await page.getByText(/3 or more letters or digits/).waitFor();
    await field.press('Escape');
    await row(page, other).waitFor();
    expect(new URL(page.url()).searchParams.get('q')).toBeNull();
    await checkPage(page);
    await page.context().close();
  });

  test('the list loads page by page (25) as it scrolls, never everything at once', async () => {
    for (let i = 0; i < 30; i++) await say(newVisitor('many'), `hello ${i}`);
    const page = await d.signedIn(d.owner, inboxPath());
    const rows = page.locator('.inbox-rows [data-conversation]');
    await rows.nth(24).waitFor();
    await sleep(300);
    expect(await rows.count()).toBe(25);
    await page.locator('.inbox-list').evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
    await rows.nth(25).waitFor();
    expect(await rows.count()).toBeGreaterThan(25);
    await page.context().close();
  });

  test('live: a new conversation appears at the top, a message in the open one appears, another one’s unread count rises', async () => {
    const open = await say(newVisitor('live-open'), 'I am open');
    const other = await say(newVisitor('live-other'), 'I wait');
    const page = await d.signedIn(d.agent, inboxPath(open));
    await history(page).getByText('I am open').waitFor();
    await page.waitForFunction(() => document.querySelector('.connection')?.textContent === 'Live');
    const before = Number(
      await row(page, other)
        .locator('.badge')
        .innerText()
        .then((t) => t.replace(/\D/g, '')),
    );

    const fresh = newVisitor('live-new');
    const started = await say(fresh, 'A brand new question');
    await row(page, started).waitFor();
    expect(await page.locator('.inbox-rows [data-conversation]').first().getAttribute('data-conversation')).toBe(started);
    await say(`live-open-${visitors - 2}`, 'A follow-up, live');
    await history(page).getByText('A follow-up, live').waitFor();
    await say(`live-other-${visitors - 1}`, 'Still waiting');
    await page.waitForFunction(([id, n]) => document.querySelector(`[data-conversation="${id}"] .badge`)?.textContent?.startsWith(String(n)), [
      other,
      before + 1,
    ] as const);
    // The tab title counts the unread messages; the open conversation's new message was read.
    await page.waitForFunction(() => /^\(\d+\) /.test(document.title));
    await waitFor('the open conversation’s new message to be read', async () => (await card(page, open)).unreadCount === 0);
    expect(await page.evaluate(() => location.pathname + location.search)).toContain(open); // no reload, same page

    // A hidden tab does not read: the open conversation's new message counts until the tab is seen again.
    const setVisibility = (state: 'hidden' | 'visible') =>
      page.evaluate((s) => {
        Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => s });
        document.dispatchEvent(new Event('visibilitychange'));
      }, state);
    await setVisibility('hidden');
    await say(`live-open-${visitors - 2}`, 'While you were away');
    await history(page).getByText('While you were away').waitFor();
    await row(page, open).locator('.badge').waitFor();
    await sleep(600);
    expect((await card(page, open)).unreadCount).toBe(1);
    await setVisibility('visible');
    await row(page, open).locator('.badge').waitFor({ state: 'detached' });
    await page.waitForFunction(
      async ([siteId, id]) => (await (await fetch(`/manage/v1/sites/${siteId}/inbox/conversations/${id}`)).json()).data.unreadCount === 0,
      [d.site.id, open] as const,
    );
    await page.context().close();
  });

  test('keyboard only: j/k through conversations, r and Ctrl+Enter reply, Esc leaves the field, ? lists the shortcuts, e asks to close', async () => {
    const first = await say(newVisitor('keys-1'), 'keyboard one');
    const second = await say(newVisitor('keys-2'), 'keyboard two');
    const page = await d.signedIn(d.agent, inboxPath());
    await row(page, second).waitFor();
    const current = () => page.locator('.inbox-rows [aria-current="true"]').getAttribute('data-conversation');

    await page.keyboard.press('j'); // the first (newest) conversation
    await history(page).getByText('keyboard two').waitFor();
    expect(await current()).toBe(second);
    await page.keyboard.press('j');
    await history(page).getByText('keyboard one').waitFor();
    expect(await current()).toBe(first);
    await page.keyboard.press('k');
    await history(page).getByText('keyboard two').waitFor();

    await page.keyboard.press('r');
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('TEXTAREA');
    // Typing j and k in the field types them; the conversation stays.
    await page.keyboard.type('just a quick reply, ok');
    expect(await current()).toBe(second);
    await page.keyboard.press('Control+Enter');
    await history(page).getByText('just a quick reply, ok').waitFor();
    expect((await publicMessages(second)).at(-1)).toMatchObject({ content: 'just a quick reply, ok', authorId: d.agent.id, origin: 'messenger' });

    await page.keyboard.press('Escape'); // out of the field: shortcuts again
    await page.keyboard.press('?');
    const sheet = page.getByRole('dialog', { name: 'Keyboard shortcuts' });
    await sheet.waitFor();
    expect(await sheet.innerText()).toMatch(/Next conversation[\s\S]*Previous conversation[\s\S]*Send the reply/);
    await checkPage(page, 'inbox-shortcuts');
    await page.keyboard.press('j'); // nothing behind a dialog
    expect(await current()).toBe(second);
    await page.keyboard.press('Escape');
    await sheet.waitFor({ state: 'detached' });

    await page.keyboard.press('e');
    const confirm = page.getByRole('dialog', { name: 'Close this conversation?' });
    await confirm.waitFor();
    await page.keyboard.press('Escape');
    await confirm.waitFor({ state: 'detached' });
    expect((await card(page, second)).state).toBe('open');
    await page.context().close();
  });

  test('j held down passes over conversations without opening each: only where it stops is loaded and read', async () => {
    const ids: string[] = [];
    for (let i = 1; i <= 8; i++) ids.push(await say(newVisitor(`burst-${i}`), `burst message ${i}`));
    const page = await d.signedIn(d.agent, inboxPath());
    for (const id of ids) await row(page, id).waitFor();
    const current = () => page.locator('.inbox-rows [aria-current="true"]').getAttribute('data-conversation');
    /** The conversations whose history was asked for: one asked is one opened (with its visitor, notes, read mark...). */
    const opened = new Set<string>();
    page.on('request', (r) => {
      const m = /\/inbox\/conversations\/(conv_[0-9a-z]+)\/messages$/.exec(new URL(r.url()).pathname);
      if (m && r.method() === 'GET') opened.add(m[1]);
    });

    // A held key: j every 33 ms from the page's own timers, with frames (and effects) between.
    await page.evaluate(async () => {
      for (let i = 0; i < 8; i++) {
        document.body.dispatchEvent(new KeyboardEvent('keydown', { key: 'j', bubbles: true }));
        await new Promise((r) => setTimeout(r, 33));
      }
    });
    // The newest first: eight steps end on the oldest of the eight.
    await history(page).getByText('burst message 1').waitFor();
    expect(await current()).toBe(ids[0]);
    // The first step opens at once (the next one comes before its history is asked for); the rest
    // wait for the selection to rest. A stall of the loaded machine longer than the wait may open
    // one or two more, never each.
    expect(opened.has(ids[0])).toBe(true);
    expect(opened.size).toBeLessThanOrEqual(3);
    await waitFor('the conversation stopped at to be read', async () => (await card(page, ids[0])).unreadCount === 0);
    for (const id of ids.slice(1, 7).filter((id) => !opened.has(id))) expect((await card(page, id)).unreadCount).toBe(1);
    await page.context().close();
  });

  test('shared replies: an owner adds one with {visitor.name}; an agent types /, filters, Enter inserts it filled in for the visitor', async () => {
    const visitorId = newVisitor('named');
    const conv = await say(visitorId, 'Hi there');
    await d.h.runtime.services.visitors.store.record(d.site.id, visitorId, { name: 'Maria Lopez', verified: true }, Date.now());
    const anonymous = await say(newVisitor('anonymous'), 'Anyone?');

    // The owner keeps the site's replies in the Shared replies dialog.
    const ownerPage = await d.signedIn(d.owner, inboxPath(conv));
    await history(ownerPage).getByText('Hi there').waitFor();
    await ownerPage.getByRole('button', { name: 'Shared replies' }).click();
    const editor = ownerPage.getByRole('dialog', { name: 'Shared replies' });
    await editor.getByText('None yet.').waitFor();
    await editor.getByLabel('Title').fill('Order number');
    await editor.getByLabel('Text').fill('Thanks {visitor.firstName|there}! Could you send me your **order number**?');
    await editor.getByRole('button', { name: 'Add', exact: true }).click();
    await editor.getByText('Saved “Order number”.').waitFor();
    await editor.getByLabel('Title').fill('Greeting');
    await editor.getByLabel('Text').fill('Hello {visitor.name}, how can I help?');
    await editor.getByRole('button', { name: 'Add', exact: true }).click();
    await editor.getByRole('list', { name: 'The site’s shared replies' }).getByText('Greeting').waitFor();
    await checkPage(ownerPage, 'inbox-shared-replies');
    await editor.getByRole('button', { name: 'Done' }).click();
    await ownerPage.context().close();

    // An agent uses them: / lists them filled in for this visitor, typing filters, Enter inserts.
    const page = await d.signedIn(d.agent, inboxPath(conv));
    await history(page).getByText('Hi there').waitFor();
    await replyField(page).focus();
    await page.keyboard.type('/');
    const list = page.getByRole('listbox', { name: 'Shared replies' });
    await list.waitFor();
    expect(await list.getByRole('option').allInnerTexts()).toEqual([
      expect.stringContaining('Hello Maria Lopez, how can I help?'),
      expect.stringContaining('Thanks Maria! Could you send me'),
    ]);
    await page.keyboard.type('order');
    expect(await list.getByRole('option').allInnerTexts()).toEqual([expect.stringContaining('Order number')]);
    await checkPage(page, 'inbox-canned');
    await page.keyboard.press('Enter');
    await list.waitFor({ state: 'detached' });
    expect(await replyField(page).inputValue()).toBe('Thanks Maria! Could you send me your **order number**?');

    // Esc closes the list and leaves the text; an agent reads the replies but cannot change them.
    await replyField(page).fill('');
    await replyField(page).focus();
    await page.keyboard.type('/gree');
    await list.getByRole('option', { name: /Greeting/ }).waitFor();
    await page.keyboard.press('Escape');
    await list.waitFor({ state: 'detached' });
    expect(await replyField(page).inputValue()).toBe('/gree');
    await page.getByRole('button', { name: 'Shared replies' }).click();
    const readOnly = page.getByRole('dialog', { name: 'Shared replies' });
    await readOnly.getByText('owners add and change them').waitFor();
    expect(await readOnly.getByRole('button', { name: /^Edit/ }).count()).toBe(0);
    await checkPage(page);
    await readOnly.getByRole('button', { name: 'Done' }).click();

    // Another conversation, an anonymous visitor: the fallback, not the inbox's friendly name.
    await page.goto(`${d.origin}/dashboard${inboxPath(anonymous)}`);
    await history(page).getByText('Anyone?').waitFor();
    await replyField(page).focus();
    await page.keyboard.type('/order');
    // The list opens once this page has read the site's replies; Enter before that is a new line.
    await list.getByRole('option', { name: /Order number/ }).waitFor();
    await page.keyboard.press('Enter');
    expect(await replyField(page).inputValue()).toBe('Thanks there! Could you send me your **order number**?');
    await page.context().close();
  });

  test('canned replies this browser kept before they were shared are offered to an owner once, and imported', async () => {
    const conv = await say(newVisitor('import'), 'Hello again');
    const ctx = await d.newContext();
    const kept = [
      { title: 'Refund', body: 'Your refund is on its way.' },
      { title: 'order NUMBER', body: 'A title the site has already (another case).' },
    ];
    // Init scripts run in every document, the first about:blank too, where storage is refused.
    await ctx.addInitScript(
      ([key, value]) => {
        try {
          if (!localStorage.getItem(key)) localStorage.setItem(key, value);
        } catch {
          // not the dashboard's document
        }
      },
      [`dashboard.canned.${d.owner.id}`, JSON.stringify(kept)],
    );
    const page = await ctx.newPage();
    await page.goto(`${d.origin}/dashboard${inboxPath(conv)}`);
    await d.signIn(page, d.owner.email);
    const offer = page.getByRole('region', { name: 'Import canned replies' });
    await offer.getByText('This browser kept 2 canned replies').waitFor();
    await checkPage(page, 'inbox-import-offer');
    await offer.getByRole('button', { name: 'Import 2 replies' }).click();
    const said = page.getByText(/^Imported 1 reply\. 1 left out: “order NUMBER” \(duplicate\)\.$/);
    await said.waitFor();
    await replyField(page).focus();
    await page.keyboard.type('/refund');
    await page
      .getByRole('listbox', { name: 'Shared replies' })
      .getByRole('option', { name: /Refund/ })
      .waitFor();

    // Offered once: not again after a reload, in this browser.
    await page.reload();
    await history(page).getByText('Hello again').waitFor();
    await page.getByRole('button', { name: 'Keyboard shortcuts' }).waitFor();
    expect(await page.getByRole('region', { name: 'Import canned replies' }).count()).toBe(0);
    await ctx.close();

    // An agent is never offered it; "No, thanks" also ends the offer.
    for (const who of [d.agent, d.owner]) {
      const c = await d.newContext();
      await c.addInitScript(
        ([key, value]) => {
          try {
            if (!localStorage.getItem(key)) localStorage.setItem(key, value);
          } catch {
            // not the dashboard's document
          }
        },
        [`dashboard.canned.${who.id}`, JSON.stringify(kept)],
      );
      const p = await c.newPage();
      await p.goto(`${d.origin}/dashboard${inboxPath(conv)}`);
      await d.signIn(p, who.email);
      await history(p).getByText('Hello again').waitFor();
      if (who === d.agent) expect(await p.getByRole('region', { name: 'Import canned replies' }).count()).toBe(0);
      else {
        await p.getByRole('button', { name: 'No, thanks' }).click();
        await p.reload();
        await history(p).getByText('Hello again').waitFor();
        expect(await p.getByRole('region', { name: 'Import canned replies' }).count()).toBe(0);
      }
      await c.close();
    }
    const titles = (await d.h.runtime.services.replies.list(d.site.id)).map((r) => r.title);
    expect(titles.filter((t) => t === 'Refund')).toHaveLength(1);
  });

  test('a phone-width layout (375x740): the list, then the conversation with a way back', async () => {
    const conv = await say(newVisitor('phone'), 'Writing from my phone');
    const page = await d.signedIn(d.agent, inboxPath(), { viewport: { width: 375, height: 740 } });
    await row(page, conv).waitFor();
    expect(await page.locator('.inbox-main').isVisible()).toBe(false);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await checkPage(page, 'inbox-phone-list');
    await row(page, conv).click();
    await history(page).getByText('Writing from my phone').waitFor();
    expect(await page.locator('.inbox-list').isVisible()).toBe(false);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await replyField(page).fill('Answering on a **small** screen');
    await checkPage(page, 'inbox-phone');
    await page.getByRole('button', { name: '← Conversations' }).click();
    await row(page, conv).waitFor();
    expect(await page.locator('.inbox-main').isVisible()).toBe(false);
    expect(new URL(page.url()).search).toBe('');
    // The browser's Back (a phone's back gesture) does the same; the draft is still there when it comes back.
    await row(page, conv).click();
    expect(await replyField(page).inputValue()).toBe('Answering on a **small** screen');
    await page.goBack();
    await page.locator('.inbox-list').waitFor({ state: 'visible' });
    expect(await page.locator('.inbox-main').isVisible()).toBe(false);
    await page.context().close();
  });

  test('no page error in any page visited', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
