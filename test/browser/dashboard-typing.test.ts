/**
 * Typing and "seen" end to end in Chromium against the real service over HTTPS (issue 25, item 4):
 * a visitor in the real chat window on a shop page under a strict CSP, and an agent in the
 * dashboard's inbox, side by side. The visitor typing shows in the inbox and is gone after the
 * pause; the agent typing shows in the window and is gone after the pause; the reply shown in the
 * open window shows "Seen" under it in the inbox, live. Axe-clean, no CSP violation, no page error.
 */
import { describeInChromium } from '../helpers/chromium';
import { allViolations, panelOf, startShop, type Shop } from './dashboard/shop';
import { checkPage, DashboardHarness, dashboardHarness, provokeViolation, violations } from './dashboard/harness';

/** A liveness bound far above the 3 s pause after which a typist's stop is sent (and the 6 s expiry behind it). */
const GONE_MS = 15_000;

describeInChromium('typing both ways and "seen" between the window and the inbox (SQLite pass only)', () => {
  let d: DashboardHarness;
  let shop: Shop;

  beforeAll(async () => {
    d = await dashboardHarness();
    shop = await startShop(d);
  }, 60_000);

  afterAll(async () => {
    await shop?.close();
    await d?.close();
  });

  test('the visitor typing shows in the inbox, the agent typing in the window, each gone after the pause; the reply shown is "Seen"', async () => {
    const inbox = await d.signedIn(d.agent, `/sites/${d.site.id}/inbox`);
    await inbox.getByText('No conversations here.').waitFor();
    const shopPage = await (await d.newContext()).newPage();
    await shopPage.goto(`${shop.origin}/`);
    await shopPage.locator('#chat-window-root button.launcher').click();
    const panel = await panelOf(shopPage, d.site.id);
    await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
    await panel.locator('#cw-input').fill('Is the red one in stock?');
    await panel.locator('#cw-input').press('Enter');
    await panel.locator('.msg.mine:not(.pending)').waitFor();
    const row = inbox.locator('.inbox-rows [data-conversation]');
    await row.first().waitFor({ timeout: 10_000 });
    await row.first().click();
    const history = inbox.getByRole('log', { name: 'Messages' });
    await history.getByText('red one').waitFor();

    // 1. The visitor types (never sends): the inbox says so, and not what; then the pause ends it.
    const typingLine = inbox.locator('.inbox-typing');
    await panel.locator('#cw-input').pressSequentially('Actually, and the', { delay: 40 });
    await typingLine.getByText('The visitor is typing…').waitFor({ timeout: 10_000 });
    expect(await inbox.locator('body').innerText()).not.toContain('Actually, and the');
    await checkPage(inbox, 'inbox-visitor-typing');
    await typingLine.waitFor({ state: 'detached', timeout: GONE_MS });

    // 2. The agent types: the window shows it, politely announced; then the pause ends it.
    const reply = inbox.getByRole('textbox', { name: 'Reply (markdown)' });
    await reply.pressSequentially('Yes, it', { delay: 40 });
    const windowLine = panel.locator('#cw-typing');
    await windowLine.getByText('Typing a reply…').waitFor({ timeout: 10_000 });
    expect(await windowLine.getAttribute('aria-live')).toBe('polite');
    await panel.waitForFunction(() => document.getElementById('cw-typing')?.textContent === '', undefined, { timeout: GONE_MS });

    // 3. The agent sends; the open window shows the reply, and the inbox says "Seen" under it, live.
    await reply.fill('Yes, it is in stock.');
    await inbox.getByRole('button', { name: 'Send' }).click();
    await panel.locator('.msg.theirs', { hasText: 'is in stock' }).waitFor({ timeout: 10_000 });
    const seen = history.locator('.msg-outgoing', { hasText: 'is in stock' }).locator('.msg-seen');
    await seen.waitFor({ timeout: 10_000 });
    expect(await seen.innerText()).toBe('Seen');
    expect(await history.locator('.msg-seen').count()).toBe(1);
    await checkPage(inbox, 'inbox-seen');

    expect(await violations(inbox)).toEqual([]);
    expect(await allViolations(shopPage)).toEqual([]);
    expect(d.pageErrors).toEqual([]);
    expect((await provokeViolation(inbox)).length).toBeGreaterThan(0);
    expect((await provokeViolation(shopPage)).length).toBeGreaterThan(0);
  }, 90_000);
});
