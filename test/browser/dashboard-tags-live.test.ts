/**
 * Tags changed live (issue 25, item 6), in Chromium against the real service: an owner renames a
 * tag in the settings of one browser profile while an agent's inbox in another shows the new name
 * without a reload, on the row, in the tag filter and in the picker; a tag the owner adds appears
 * in the agent's picker; deleting the tag the agent's list is filtered by takes it off the rows and
 * resets the filter with a notice; a conversation given the tag the list is filtered by joins it
 * live. No CSP violation, axe clean.
 */
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { DashboardHarness, dashboardHarness, checkPage } from './dashboard/harness';
import { CLI_ACTOR } from '../../server/accounts/common';

describeInChromium('tags changed live in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  beforeAll(async () => {
    d = await dashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await d?.close();
  });
  const row = (page: Page, id: string) => page.locator(`.inbox-rows [data-conversation="${id}"]`);
  const optionNames = (page: Page, selector: string) => page.locator(`${selector} option`).evaluateAll((options) => options.map((o) => o.textContent ?? ''));

  test("an owner's rename and deletion show in an agent's open inbox without a reload; a newly tagged conversation joins a filtered list", async () => {
    const tags = d.h.runtime.services.tags;
    const billing = await tags.create(CLI_ACTOR, d.site.id, { name: 'Billing' });
    const shipping = await tags.create(CLI_ACTOR, d.site.id, { name: 'Shipping' });
    const tagged = (await d.h.visitorSay(d.site.id, 'tags-live-a', 'About my invoice')).conversation.id;
    const untagged = (await d.h.visitorSay(d.site.id, 'tags-live-b', 'Where is my parcel?')).conversation.id;
    const agent = { ...CLI_ACTOR, manager: { accountId: d.agent.id, email: d.agent.email, via: 'session' as const } };
    await tags.apply(agent, d.site.id, tagged, billing.id);

    // The agent's inbox, the untagged conversation open (its picker offers both tags), filtered by nothing yet.
    const page = await d.signedIn(d.agent, `/sites/${d.site.id}/inbox?conversation=${untagged}`);
    await row(page, tagged).locator('.tag-chips').getByText('Billing').waitFor();
    const picker = page.getByLabel('Tag to add');
    await picker.locator('option', { hasText: 'Shipping' }).waitFor({ state: 'attached' });
    const filter = page.getByRole('group', { name: 'Filters' }).getByLabel('Tag');
    expect(await optionNames(page, '.inbox-filters label:has-text("Tag") select')).toEqual(['Any', 'Billing', 'Shipping']);

    // The owner renames Billing in the settings, in a profile of its own.
    const settings = await d.signedIn(d.owner, `/sites/${d.site.id}/settings`);
    const region = settings.getByRole('region', { name: 'Tags' });
    await region.getByRole('button', { name: 'Rename Billing' }).click();
    await region.getByLabel('New name for Billing').fill('Invoices');
    await region.getByRole('button', { name: 'Save' }).click();
    await region.getByRole('list', { name: "The site's tags" }).getByText('Invoices').waitFor();

    // The agent's page follows: the row, the filter (in name order) and the picker, with no reload.
    await row(page, tagged).locator('.tag-chips').getByText('Invoices').waitFor();
    await page.waitForFunction(() => Array.from(document.querySelectorAll('.inbox-filters select option')).some((o) => o.textContent === 'Invoices'));
    expect(await optionNames(page, '.inbox-filters label:has-text("Tag") select')).toEqual(['Any', 'Invoices', 'Shipping']);
    await picker.locator('option', { hasText: 'Invoices' }).waitFor({ state: 'attached' });
    expect(await picker.locator('option', { hasText: 'Billing' }).count()).toBe(0);
    await checkPage(page, 'inbox-tag-renamed');

    // A tag the owner adds is offered in the agent's picker at once.
    await region.getByLabel('New tag').fill('Returns');
    await region.getByRole('button', { name: 'Add tag' }).click();
    await picker.locator('option', { hasText: 'Returns' }).waitFor({ state: 'attached' });

    // The agent filters by Invoices; the owner deletes it: the rows drop it and the filter resets, saying why.
    await filter.selectOption({ label: 'Invoices' });
    await page.waitForFunction((cid) => !document.querySelector(`.inbox-rows [data-conversation="${cid}"]`), untagged);
    await region.getByRole('button', { name: 'Delete Invoices' }).click();
    await settings.getByRole('button', { name: 'Delete tag' }).click();
    await page.getByRole('status').getByText('The tag “Invoices” was deleted: the list no longer filters by it.').waitFor();
    await row(page, untagged).waitFor();
    expect(await filter.inputValue()).toBe('');
    expect(await optionNames(page, '.inbox-filters label:has-text("Tag") select')).toEqual(['Any', 'Returns', 'Shipping']);
    await page.waitForFunction((cid) => !document.querySelector(`[data-conversation="${cid}"] .tag-chips`), tagged);
    expect(await picker.locator('option', { hasText: 'Invoices' }).count()).toBe(0);
    await checkPage(page, 'inbox-tag-deleted');
    // Choosing a filter again clears the notice.
    await filter.selectOption({ label: 'Shipping' });
    await page.waitForFunction(() => !document.querySelector('.inbox-filter-notice')?.textContent);
    // A conversation given the filtered tag joins the list live (none carries Shipping yet).
    await page.getByText('No conversations here.').waitFor();
    await tags.apply(agent, d.site.id, tagged, shipping.id);
    await row(page, tagged).locator('.tag-chips').getByText('Shipping').waitFor();
    expect(await row(page, untagged).count()).toBe(0);
    await checkPage(page);
    await checkPage(settings);
    await page.context().close();
    await settings.context().close();
  });
});
