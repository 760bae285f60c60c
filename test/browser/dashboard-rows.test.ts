/**
 * Inbox rows that say what is waiting, and tags (issue 25, items 1 and 6), in Chromium against
 * the real service: an owner adds a tag in the settings; a row names the visitor, previews its
 * message and says since when it waits (the exact time on hover); an agent tags the open
 * conversation with the keyboard-usable picker and another member's list shows the tag live; the
 * agent's reply turns the row to "You: ..." and "Answered by you". No CSP violation, axe clean.
 */
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, checkPage } from './dashboard/harness';

describeInChromium('inbox rows and tags in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });
  const row = (page: Page, id: string) => page.locator(`.inbox-rows [data-conversation="${id}"]`);

  test('rows show name, preview, wait and tags; a tag put on by an agent shows live in another list', async () => {
    const settings = await d.signedIn(d.owner, `/sites/${d.site.id}/settings`);
    const tags = settings.getByRole('region', { name: 'Tags' });
    await tags.getByLabel('New tag').fill('  Billing ');
    await tags.getByRole('button', { name: 'Add tag' }).click();
    await tags.getByRole('list', { name: "The site's tags" }).getByText('Billing').waitFor();
    await checkPage(settings, 'settings-tags');

    const said = await d.h.visitorSay(d.site.id, 'rows-visitor', 'Hello,\n\nwhere is   my order?');
    const id = said.conversation.id;
    await d.h.runtime.services.visitors.store.record(d.site.id, 'rows-visitor', { name: 'Maria', verified: false }, Date.now());

    // The owner watches the list in a page of its own.
    await settings.goto(`${d.origin}/dashboard/sites/${d.site.id}/inbox`);
    await row(settings, id).waitFor();

    const page = await d.signedIn(d.agent, `/sites/${d.site.id}/inbox`);
    const r = row(page, id);
    await r.getByText('Maria').waitFor();
    expect(await r.locator('.inbox-row-preview').innerText()).toBe('Hello, where is my order?');
    const waiting = r.locator('.inbox-row-waiting time');
    expect(await waiting.getAttribute('datetime')).toBe(said.message.createdAt);
    expect(await waiting.getAttribute('title')).toMatch(/\d{4}/);
    await checkPage(page, 'inbox-rows');

    // Tag the open conversation with the keyboard: the select, then its button.
    await r.click();
    const picker = page.locator('.tag-picker');
    await picker.getByLabel('Tag to add').focus();
    await picker.getByLabel('Tag to add').selectOption({ label: 'Billing' });
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await picker.getByRole('button', { name: 'Remove tag Billing' }).waitFor();
    await r.locator('.tag-chips').getByText('Billing').waitFor();
    // The owner's list follows live (conversation.tagged).
    await row(settings, id).locator('.tag-chips').getByText('Billing').waitFor();
    await checkPage(page);

    // The agent answers: its row says "You:" and who answered; the wait is over.
    await page.getByRole('textbox', { name: 'Reply (markdown)' }).fill('It **ships** today: [track it](https://example.com/t)');
    await page.getByRole('button', { name: 'Send' }).click();
    await r.locator('.inbox-row-preview').getByText('You: It ships today: track it').waitFor();
    await r.getByText(/Answered by you/).waitFor();
    expect(await r.locator('.inbox-row-waiting').count()).toBe(0);
    // The owner sees the agent's name in place of "You".
    await row(settings, id).locator('.inbox-row-preview').getByText('agent: It ships today: track it').waitFor();

    // The owner filters the list by the tag: the tagged conversation stays, an untagged one goes.
    const other = (await d.h.visitorSay(d.site.id, 'rows-untagged', 'No tag here')).conversation.id;
    await settings.reload();
    await row(settings, other).waitFor();
    await settings.getByRole('group', { name: 'Filters' }).getByLabel('Tag').selectOption({ label: 'Billing' });
    await settings.waitForFunction((cid) => !document.querySelector(`.inbox-rows [data-conversation="${cid}"]`), other);
    await row(settings, id).waitFor();
    await checkPage(settings);

    // Taking the tag off.
    await picker.getByRole('button', { name: 'Remove tag Billing' }).click();
    await page.waitForFunction((cid) => !document.querySelector(`[data-conversation="${cid}"] .tag-chips`), id);
    await checkPage(settings);
    await page.context().close();
    await settings.context().close();
  });
});
