/**
 * Internal notes in Chromium (issue 25, item 5), against the real service over HTTPS: a visitor on
 * a shop page (another origin embedding the chat window with the snippet, under a strict CSP), the
 * agent in the inbox, and the owner in a dashboard of their own. The agent switches the composer to
 * Note by keyboard, mentions the owner with the `@` list, and adds the note: it shows in the history
 * between messages, styled apart (yellow, "Internal note"), while the window on the shop page never
 * shows it, before or after the agent's next reply reaches it. The owner's dashboard is told of the
 * mention on whichever page it is; a second agent, not mentioned, is not. No CSP violation, no page
 * error, no serious axe finding.
 */
import { describeInChromium, waitForFocus } from '../helpers/chromium';
import { allViolations, panelOf, startShop, type Shop } from './dashboard/shop';
import { newMember } from '../manage/helpers';
import { checkPage, DashboardHarness, dashboardHarness, provokeViolation, screenshot, violations } from './dashboard/harness';

describeInChromium('internal notes in the inbox, beside the chat window (SQLite pass only)', () => {
  let d: DashboardHarness;
  let shop: Shop;

  beforeAll(async () => {
    d = await dashboardHarness();
    await newMember(d.h, d.site.id, 'agent2@example.com', 'agent');
    // The owner's name as notes and mentions show it (migration 018's column).
    await d.h.runtime.db('accounts').where({ id: d.owner.id }).update({ display_name: 'Olga Owner' });
    shop = await startShop(d);
  }, 60_000);

  afterAll(async () => {
    await shop?.close();
    await d?.close();
  });

  test('a note with a mention: shown in the inbox styled apart, never in the window; the mentioned owner alone is told', async () => {
    // The owner and a second agent have their dashboards open elsewhere (the owner on the keys page).
    const ownerPage = await d.signedIn(d.owner, `/sites/${d.site.id}/keys`);
    const agent2Page = await d.signedIn({ id: '', email: 'agent2@example.com' }, `/sites/${d.site.id}/inbox`);
    const inbox = await d.signedIn(d.agent, `/sites/${d.site.id}/inbox`);
    await inbox.getByText('No conversations here.').waitFor();

    // The visitor writes from the shop page.
    const shopPage = await (await d.newContext()).newPage();
    await shopPage.goto(`${shop.origin}/`);
    await shopPage.locator('#chat-window-root button.launcher').click();
    const panel = await panelOf(shopPage, d.site.id);
    await panel.locator('#cw-status:empty').waitFor({ state: 'attached' });
    await panel.locator('#cw-input').fill('My parcel never arrived.');
    await panel.locator('#cw-input').press('Enter');
    const row = inbox.locator('.inbox-rows [data-conversation]').first();
    await row.waitFor({ timeout: 10_000 });
    await row.click();
    const history = inbox.getByRole('log', { name: 'Messages' });
    await history.getByText('My parcel never arrived.').waitFor();

    // Keyboard only: Tab to the switch, arrow to Note; the note field takes the text.
    const replyRadio = inbox.getByRole('radio', { name: 'Reply' });
    await replyRadio.focus();
    await inbox.keyboard.press('ArrowRight');
    expect(await inbox.getByRole('radio', { name: 'Note' }).isChecked()).toBe(true);
    const field = inbox.getByRole('textbox', { name: 'Internal note (markdown)' });
    await field.focus();
    await field.pressSequentially('Carrier says lost. @ow');
    const option = inbox.getByRole('option', { name: 'owner@example.com' });
    await option.waitFor();
    await inbox.keyboard.press('Enter');
    expect(await field.inputValue()).toBe('Carrier says lost. @owner@example.com ');
    await field.pressSequentially('can we **refund**?');
    await inbox.keyboard.press('Control+Enter');

    // In the history, after the visitor's message, yellow and labelled, with its author.
    const noteItem = history.locator('li.msg-note');
    await noteItem.waitFor();
    expect(await noteItem.locator('.note-tag').innerText()).toBe('Internal note');
    expect(await noteItem.locator('.msg-author').innerText()).toBe('You');
    expect(await noteItem.locator('strong').innerText()).toBe('refund');
    expect(await noteItem.locator('.note-mentions').innerText()).toBe('Mentions: Olga Owner');
    const background = await noteItem.evaluate((el) => getComputedStyle(el).backgroundColor);
    const messageBackground = await history.locator('li.msg-incoming').evaluate((el) => getComputedStyle(el).backgroundColor);
    expect(background).toBe('rgb(255, 248, 225)'); // --warning-bg
    expect(background).not.toBe(messageBackground);
    const order = await history.locator('li.msg').evaluateAll((els) => els.map((el) => (el.classList.contains('msg-note') ? 'note' : 'message')));
    expect(order).toEqual(['message', 'note']);
    await checkPage(inbox, 'inbox-note');

    // The owner, on another page, is told; the second agent is not.
    const told = ownerPage.getByRole('status').filter({ hasText: 'mentioned you in a note' });
    await told.waitFor({ timeout: 10_000 });
    expect((await told.textContent())?.replace(/\s+/g, ' ')).toContain('agent mentioned you in a note');
    await screenshot(ownerPage, 'mention-notice');
    await agent2Page.locator('li.msg-note, .inbox-rows [data-conversation]').first().waitFor();
    expect(await agent2Page.getByText('mentioned you in a note').count()).toBe(0);
    // Opening it from the notice shows the note, marked as mentioning them.
    await told.getByRole('link', { name: 'Open' }).click();
    const ownerNote = ownerPage.getByRole('log', { name: 'Messages' }).locator('li.msg-note.note-mentions-me');
    await ownerNote.waitFor();
    expect(await ownerNote.locator('.note-mentions').innerText()).toBe('Mentions: you');
    expect(await ownerPage.getByText('mentioned you in a note').count()).toBe(0);

    // Back to Reply; the reply reaches the window, and the note never did.
    await inbox.locator('.compose-switch label', { hasText: 'Reply' }).click();
    expect(await inbox.getByRole('radio', { name: 'Reply' }).isChecked()).toBe(true);
    await inbox.getByRole('textbox', { name: 'Reply (markdown)' }).fill('We are sending a refund today.');
    await inbox.getByRole('button', { name: 'Send' }).click();
    await panel.locator('.msg.theirs', { hasText: 'refund today' }).waitFor({ timeout: 10_000 });
    const windowText = await panel.locator('body').innerText();
    expect(windowText).not.toContain('Carrier says lost');
    expect(windowText).not.toContain('owner@example.com');
    expect(await panel.locator('.msg').count()).toBe(2);

    // No CSP violation anywhere, no page error; the recorders do hear one caused on purpose.
    expect(await violations(inbox)).toEqual([]);
    expect(await violations(ownerPage)).toEqual([]);
    expect(await allViolations(shopPage)).toEqual([]);
    expect(d.pageErrors).toEqual([]);
    expect((await provokeViolation(inbox)).length).toBeGreaterThan(0);
    expect((await provokeViolation(shopPage)).length).toBeGreaterThan(0);
  }, 60_000);

  /** A visitor's conversation open in the agent's inbox, the note field taken with the `n` shortcut from the history. */
  async function noteByShortcut(visitorId: string, says: string) {
    const conv = (await d.h.visitorSay(d.site.id, visitorId, says)).conversation.id as string;
    const inbox = await d.signedIn(d.agent, `/sites/${d.site.id}/inbox?conversation=${conv}`);
    const history = inbox.getByRole('log', { name: 'Messages' });
    await history.getByText(says).waitFor();
    await history.focus();
    await inbox.keyboard.press('n');
    const field = inbox.getByRole('textbox', { name: 'Internal note (markdown)' });
    await waitForFocus(field);
    return { conv, inbox, history, field };
  }

  test('a mention picked and typed straight on: what follows stays after it, however soon the next key comes', async () => {
    const { inbox, field } = await noteByShortcut('caret-visitor', 'Can someone check?');
    await field.pressSequentially('Ask @ow');
    await inbox.getByRole('option', { name: 'owner@example.com' }).waitFor();
    // Enter picks the mention; the next characters come before the page's next frame, the rest after.
    const value = await field.evaluate(async (f: HTMLTextAreaElement) => {
      f.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true, cancelable: true }));
      await Promise.resolve(); // the render that shows the mention
      document.execCommand('insertText', false, 'to');
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      document.execCommand('insertText', false, ' look');
      return f.value;
    });
    expect(value).toBe('Ask @owner@example.com to look');
    await inbox.context().close();
  });

  test('the n shortcut writes a note; its author edits and deletes it; the timeline shows notes among messages', async () => {
    const { conv, inbox, history, field } = await noteByShortcut('timeline-visitor', 'Where is my invoice?');
    await field.fill('Invoice resent from billing.');
    await inbox.getByRole('button', { name: 'Add note' }).click();
    await history.locator('li.msg-note', { hasText: 'Invoice resent' }).waitFor();
    // By its id from here: while edited, its text is in a field, not in the item's text.
    const note = history.locator(`li[data-note="${await history.locator('li.msg-note').getAttribute('data-note')}"]`);

    await note.getByRole('button', { name: 'Edit this note' }).click();
    await note.getByRole('textbox', { name: 'Edit the note' }).fill('Invoice resent from billing, twice.');
    await note.getByRole('button', { name: 'Save' }).click();
    await note.getByText('twice.').waitFor();
    expect(await note.locator('.msg-meta').innerText()).toContain('edited');

    await inbox.goto(`${d.origin}/dashboard/sites/${d.site.id}/timeline?conversation=${conv}`);
    const timeline = inbox.getByRole('list', { name: 'Timeline, oldest first' });
    const entry = timeline.locator('li.tl-note');
    await entry.waitFor();
    expect(await entry.innerText()).toContain('Invoice resent from billing, twice.');
    expect(await entry.innerText()).toContain('not shown to the visitor');
    await checkPage(inbox, 'timeline-note');

    await inbox.goto(`${d.origin}/dashboard/sites/${d.site.id}/inbox?conversation=${conv}`);
    const again = inbox.getByRole('log', { name: 'Messages' }).locator('li.msg-note');
    await again.waitFor();
    // Head, history, the Reply/Note switch and the composer stack without overlapping, however short the screen.
    const tops = await inbox.evaluate(() =>
      ['.inbox-conv-head', '.inbox-history', '.compose-switch', 'form.composer'].map((s) => {
        const r = document.querySelector(s)!.getBoundingClientRect();
        return [Math.round(r.top), Math.round(r.bottom)];
      }),
    );
    for (let i = 1; i < tops.length; i++) expect(tops[i][0]).toBeGreaterThanOrEqual(tops[i - 1][1]);
    await again.getByRole('button', { name: 'Delete this note' }).click();
    await inbox.getByRole('dialog', { name: 'Delete this note?' }).getByRole('button', { name: 'Delete note' }).click();
    await again.waitFor({ state: 'detached' });
    expect(await d.h.runtime.db('notes').where({ conversation_id: conv }).count({ n: '*' }).first()).toMatchObject({ n: 0 });
    expect(d.pageErrors).toEqual([]);
  }, 60_000);
});
