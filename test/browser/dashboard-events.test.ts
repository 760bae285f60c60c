/**
 * The events page and the conversation timeline in Chromium against the real service over HTTPS,
 * with a real local HTTPS receiver and real delivery workers: the address set in the page (field
 * errors from the envelope), a failed attempt in the log, the receiver fixed, a redelivery in
 * place that is delivered; a planned roll with its overlap explained, switched, then a rotation,
 * each checked by a delivery that verifies (the SDK's verifier) with the new secret only; the
 * signature checker's verdicts for crafted inputs; the timeline with authors, events and attempts,
 * an unknown entry kind rendered generically; an agent sees "Owners only". Every page visited: no
 * CSP violation, no serious or critical axe finding, screenshots in test-artifacts/dashboard/.
 */
import request from 'supertest';
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import type { Harness } from '../helpers/harness';
import { answer, deliveryEnv, Receiver, startReceiver, waitFor, workerPool, type Received } from '../webhooks/helpers';
import { M } from '../manage/helpers';
import { checkPage, dashboardHarness, provokeViolation, screenshot, type DashboardHarness, type Person } from './dashboard/harness';
import { verifySignedDelivery } from '../../sdk/src/webhooks';
import { SWITCH_SETTLE_MS } from '../../server/webhooks/address-rules';

describeInChromium('the events page and the timeline in Chromium (SQLite pass only)', () => {
  let receiver: Receiver;
  let d: DashboardHarness;
  let h: Harness;
  let site: string;
  let owner: Person;
  let agent: Person;
  const pool = workerPool(() => h);
  let failing = true;

  beforeAll(async () => {
    receiver = await startReceiver();
    receiver.on('/hooks', (req, res, body) => (failing ? answer(500, 'receiver broke: database is down') : answer(200, 'ok'))(req, res, body));
    // What delivery to a local receiver needs (private networks, its CA), and a clock the times are shown in.
    d = await dashboardHarness({ env: deliveryEnv(receiver, { delaysMs: [50] }), onEvents: () => pool.wake(), context: { timezoneId: 'UTC' } });
    ({ h, owner, agent } = d);
    site = d.site.id;
    pool.start();
  }, 60_000);

  afterAll(async () => {
    await pool.stopAll();
    await d?.close();
    await receiver?.close();
  });

  const eventsPath = () => `/sites/${site}/events`;

  /** What the receiver got for one delivery id, newest last. */
  const receivedFor = (eventId: string) => receiver.requests.filter((r) => r.headers['x-service-delivery'] === eventId);
  /** The SDK's verdict on a received request with these secrets: null when it verifies. */
  async function sdkRefusal(r: Received, secrets: string[]): Promise<string | null> {
    try {
      const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));
      await verifySignedDelivery({ rawBody: r.body, headers, secrets });
      return null;
    } catch (err) {
      return (err as { reason: string }).reason;
    }
  }
  /** Sends a test delivery from the address tab and answers what the receiver got for it. */
  async function testDelivery(page: Page): Promise<Received> {
    const before = receiver.at('/hooks').length;
    await page.getByRole('button', { name: 'Send test delivery' }).click();
    await page.getByRole('status').filter({ hasText: 'Duration' }).waitFor();
    await waitFor('the test delivery at the receiver', () => receiver.at('/hooks').length > before);
    return receiver.at('/hooks').at(-1)!;
  }

  let secret1 = '';
  let secret2 = '';
  let conversationId = '';
  let failedEventId = '';
  let signedBySecret1: Received;

  test('the CSP recorder hears a violation caused on purpose', async () => {
    const page = await (await d.newContext()).newPage();
    await page.goto(`${d.origin}/dashboard/`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect((await provokeViolation(page)).join()).toMatch(/style-src/);
    await page.context().close();
  });

  test('the address: field errors (in the page and from the envelope), set to the receiver, the secret once, a failing test delivery', async () => {
    const page = await d.signedIn(owner, eventsPath());
    await page.getByRole('heading', { name: 'Events', level: 1 }).waitFor();
    await page.getByText('No event address yet.').waitFor();
    const form = page.getByRole('form', { name: 'Set the event address' });

    await form.getByLabel('URL').fill('http://hooks.example.com/chat');
    await form.getByRole('button', { name: 'Set address' }).click();
    await form.getByText('An event address must start with https://.').waitFor();
    // The service's own check, answered in the envelope without a path, lands on the URL field.
    await form.getByLabel('URL').fill('https://no-such-host.invalid/chat');
    await form.getByRole('button', { name: 'Set address' }).click();
    await form
      .locator('.field-error')
      .filter({ hasText: /does not resolve/ })
      .waitFor();
    expect(await form.getByLabel('URL').getAttribute('aria-invalid')).toBe('true');
    // The request validator's details (a path under /body) go by field too: every event unticked is refused here first.
    await form.getByLabel('URL').fill(receiver.url('/hooks'));
    await form.getByRole('button', { name: 'Set address' }).click();

    const shown = page.getByRole('textbox', { name: 'Signing secret' });
    await shown.waitFor();
    secret1 = await shown.inputValue();
    expect(secret1).toMatch(/^whsec_[A-Za-z0-9]+$/);
    await page.getByRole('heading', { name: /Event address\s+Enabled/ }).waitFor();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(secret1);

    const got = await testDelivery(page);
    const result = page.getByRole('status').filter({ hasText: 'Duration' });
    expect(await result.innerText()).toMatch(/Failed[\s\S]*500[\s\S]*receiver broke: database is down/);
    expect(await sdkRefusal(got, [secret1])).toBeNull(); // signed with the secret shown once
    await checkPage(page, 'events');
    await page.context().close();
  });

  test('the log: a failed delivery with its attempts; the receiver fixed, redelivered in place and delivered; recovery after the count', async () => {
    const said = await h.visitorSay(site, 'visitor-1', 'Do you ship to Norway?');
    conversationId = said.conversation.id;
    const ids: string[] = (await h.runtime.db('events').where({ conversation_id: conversationId }).orderBy('created_at').select('id')).map((r) => r.id);
    failedEventId = ids.find((id) => id.startsWith('message.created:'))!;
    await waitFor('both deliveries failed', async () => (await h.runtime.db('deliveries').whereIn('event_id', ids)).every((r) => r.status === 'failed'));

    const page = await d.signedIn(owner, `${eventsPath()}?view=deliveries`);
    await page.getByRole('list', { name: 'Deliveries, newest first' }).waitFor();
    await page.getByLabel('Outcome').selectOption('failed');
    await page.getByLabel('Event', { exact: true }).selectOption('message.created');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const item = page.locator('.delivery').filter({ hasText: failedEventId });
    // The filters applied: failed message.created only (the failed test delivery from before is one too).
    const heads = () => page.locator('.delivery-head').allInnerTexts();
    await waitFor('only failed message.created listed', async () => {
      const all = await heads();
      return all.length === 2 && all.every((t) => /message\.created[\s\S]*Failed/.test(t));
    });
    expect((await heads()).filter((t) => /test/.test(t))).toHaveLength(1);
    expect(await item.innerText()).toMatch(/Failed[\s\S]*2 attempts/);

    await item.getByRole('button', { name: 'Show attempts' }).click();
    await item.getByText('Attempt 2').waitFor();
    const text = await item.innerText();
    expect(text).toMatch(/Attempt 1[\s\S]*500[\s\S]*receiver broke: database is down/);
    expect(text).toMatch(/X-Service-Signature: sha256=[0-9a-f]{64}/);
    expect(text).not.toContain(secret1);
    await checkPage(page);

    failing = false;
    await item.getByRole('button', { name: `Redeliver ${failedEventId}` }).click();
    await item.getByText('Redelivered: delivered.').waitFor({ timeout: 30_000 });
    expect(await item.locator('.delivery-head').innerText()).toMatch(/Delivered[\s\S]*3 attempts/);
    await item.getByText('Attempt 3').waitFor();
    const last = receivedFor(failedEventId).at(-1)!;
    expect(last.headers['x-service-attempt']).toBe('3');
    expect(await sdkRefusal(last, [secret1])).toBeNull();
    signedBySecret1 = last;
    await screenshot(page, 'deliveries');

    // The attempt handed to the checker verifies with the secret, at the time it was sent.
    await item.getByRole('button', { name: 'Check this signature' }).last().click();
    await page.getByRole('heading', { name: 'Signature checker' }).waitFor();
    await page.getByLabel('Secrets').fill(secret1);
    await page.getByRole('button', { name: 'Check signature' }).click();
    await page.getByText('Valid: the SDK accepts this delivery with these secrets.').waitFor();
    await checkPage(page);

    // Recovery: the count first (conversation.started failed too), then the confirmation.
    await page.getByRole('link', { name: 'Delivery log' }).click();
    await page.getByLabel('Failed since').fill(new Date(Date.now() - 3600_000).toISOString().slice(0, 19));
    await page.getByRole('button', { name: 'Count failed deliveries' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send 1 failed delivery again?' });
    await dialog.waitFor();
    await checkPage(page);
    await dialog.getByRole('button', { name: 'Send 1 again' }).click();
    await page.getByText('Queued 1 delivery again.').waitFor();
    const started = ids.find((id) => id.startsWith('conversation.started:'))!;
    await waitFor(
      'the recovered delivery delivered',
      async () => (await h.runtime.db('deliveries').where({ event_id: started }).first()).status === 'delivered',
    );
    await page.context().close();
  }, 90_000);

  test('a planned roll explained, switched now, then a rotation: each new secret verifies the next delivery, the old one does not', async () => {
    const page = await d.signedIn(owner, eventsPath());
    await page.getByRole('heading', { name: 'Signing secret' }).waitFor();
    await page.getByLabel('Switch in (hours)').fill('200');
    await page.getByRole('button', { name: 'Start planned roll' }).click();
    await page.getByText('Whole hours, 1 to 168.').waitFor();
    await page.getByLabel('Switch in (hours)').fill('24');
    await page.getByRole('button', { name: 'Start planned roll' }).click();
    secret2 = await page.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    expect(secret2).toMatch(/^whsec_/);
    expect(secret2).not.toBe(secret1);
    // The overlap, in plain words, beside the secret shown once.
    const overlap = page.locator('.overlap');
    expect(await overlap.innerText()).toMatch(
      /keeps signing with the current secret[\s\S]*accepts both until the switch[\s\S]*verifyWebhook\(\{ secrets: \[current, next\]/,
    );
    await page.getByText('A planned roll is pending.').waitFor();
    await checkPage(page);
    await page.getByRole('button', { name: 'I have copied it' }).click();

    // A second roll while one is pending is refused (409): the envelope's message is shown, no secret.
    await page.getByRole('button', { name: 'Start planned roll' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /pending/i })
      .waitFor();
    expect(await page.getByRole('textbox', { name: 'Signing secret' }).count()).toBe(0);
    // Cancelled, then rolled again: the new secret of the second roll is the one that switches.
    await page.getByRole('button', { name: 'Cancel roll' }).click();
    await page.getByRole('dialog', { name: 'Cancel the planned roll?' }).getByRole('button', { name: 'Cancel roll' }).click();
    await page.getByText('A planned roll is pending.').waitFor({ state: 'detached' });
    expect((await h.runtime.db('webhook_endpoints').where({ site_id: site }).first()).secret_next_encrypted).toBeNull();
    await page.getByRole('button', { name: 'Start planned roll' }).click();
    secret2 = await page.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    await page.getByRole('button', { name: 'I have copied it' }).click();

    // Before the switch, the current secret still signs.
    const before = await testDelivery(page);
    expect(await sdkRefusal(before, [secret1])).toBeNull();
    expect(await sdkRefusal(before, [secret2])).toBe('signature_mismatch');

    await page.getByRole('button', { name: 'Switch now' }).click();
    await page.getByRole('dialog', { name: 'Switch to the new secret now?' }).getByRole('button', { name: 'Switch now' }).click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // Once the switch time has passed (a condition on the clock the service signs by, not a sleep with a
    // margin), every attempt that starts is signed with the new secret.
    const row = await h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
    await waitFor('the switch time', () => Date.now() > Number(row.secret_switch_at), 2 * SWITCH_SETTLE_MS);
    const after = await testDelivery(page);
    expect(await sdkRefusal(after, [secret2])).toBeNull();
    expect(await sdkRefusal(after, [secret1])).toBe('signature_mismatch');

    await page.getByRole('button', { name: 'Rotate secret now' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate the signing secret now?' });
    await checkPage(page);
    await dialog.getByRole('button', { name: 'Rotate now' }).click();
    const secret3 = await page.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    expect(secret3).not.toBe(secret2);
    // A real event after the rotation carries the new secret.
    const said = await h.visitorSay(site, 'visitor-2', 'Another question');
    const id = (await h.runtime.db('events').where({ conversation_id: said.conversation.id, name: 'message.created' }).first()).id;
    await waitFor('the delivery after the rotation', () => receivedFor(id).length > 0);
    expect(await sdkRefusal(receivedFor(id)[0], [secret3])).toBeNull();
    expect(await sdkRefusal(receivedFor(id)[0], [secret2])).toBe('signature_mismatch');
    await page.context().close();
  }, 90_000);

  test('the signature checker: old secret, clock skew, body changed, a missing prefix, the header id differing from the body', async () => {
    const page = await d.signedIn(owner, `${eventsPath()}?view=checker`);
    await page.getByRole('heading', { name: 'Signature checker' }).waitFor();
    const r = signedBySecret1;
    const headers = Object.entries(r.headers)
      .map(([k, v]) => `${k}: ${String(v)}`)
      .join('\n');
    const ts = Number(r.headers['x-service-timestamp']);
    const sent: string[] = [];
    page.on('request', (req) => sent.push(`${req.url()} ${req.postData() ?? ''}`));
    const verdict = async (fill: { body?: string; secrets?: string; at?: string; signature?: string; id?: string }) => {
      await page.getByLabel('Raw body').fill(fill.body ?? r.body.toString('utf8'));
      await page.getByLabel('Headers').fill(headers);
      await page.getByLabel('X-Service-Signature').fill(fill.signature ?? '');
      await page.getByLabel('X-Service-Delivery').fill(fill.id ?? '');
      await page.getByLabel('Secrets').fill(fill.secrets ?? secret1);
      await page.getByLabel('Received at').fill(fill.at ?? String(ts + 5));
      await page.getByRole('button', { name: 'Check signature' }).click();
      await page.getByRole('heading', { name: 'Result' }).waitFor();
      return page.locator('.findings').innerText();
    };

    expect(await verdict({ secrets: `${secret1}\n${secret2}` })).toMatch(/Signed with an old secret \(secret 1 of 2\)/);
    expect(await page.locator('.verdict').innerText()).toMatch(/^Valid/);
    await checkPage(page, 'checker');
    // A new check takes the verdict away at once (its own comes from Web Crypto, later): a verdict is
    // never shown beside inputs it was not about.
    await page.getByLabel('Received at').fill(String(ts + 301));
    const cleared = await page.evaluate(async () => {
      Array.from(document.querySelectorAll('button'))
        .find((b) => b.textContent === 'Check signature')!
        .click();
      await Promise.resolve(); // the render the click set off
      return document.querySelector('.verdict') === null;
    });
    expect(cleared).toBe(true);
    expect(await verdict({ at: String(ts + 301) })).toMatch(/Clock skew: signed 301 s before/);
    expect(await verdict({ at: String(ts - 400) })).toMatch(/Clock skew: signed 400 s after/);
    const body = await verdict({ body: `${r.body.toString('utf8')}\n` });
    expect(body).toMatch(/Body changed/);
    expect(body).toMatch(/trailing newline/);
    expect(await verdict({ body: JSON.stringify(JSON.parse(r.body.toString('utf8')), null, 2) })).toMatch(/re-serialised/);
    expect(await verdict({ secrets: secret2 })).toMatch(/Body changed, or signed with a secret you did not paste/);
    const bare = String(r.headers['x-service-signature']).slice('sha256='.length);
    expect(await verdict({ signature: bare })).toMatch(/The sha256= prefix is missing/);
    expect(await verdict({ id: 'message.created:01m8b1wze5y4bmkdsspecyc1gz' })).toMatch(/X-Service-Delivery differs from the body’s id/);
    expect(await page.locator('.verdict').innerText()).toMatch(/^Not valid/);
    // Nothing typed in the checker left the page.
    expect(sent.filter((s) => s.includes(secret1) || s.includes(secret2))).toEqual([]);
    await page.context().close();
  });

  test('the timeline: messages with their authors, the events each emitted, every attempt; redeliver in place; an unknown kind shown generically', async () => {
    // A member's reply, so the timeline names a member by email.
    const token = (
      await h.runtime.services.accounts.tokens.create({ manager: { accountId: owner.id, email: owner.email, via: 'session' }, clientIp: null }, 'test')
    ).token;
    const reply = await request(h.app)
      .post(`${M}/sites/${site}/inbox/conversations/${conversationId}/messages`)
      .set('Authorization', `Bearer ${token}`)
      .send({ content: 'Yes, we ship to Norway.' });
    expect(reply.status).toBe(201);

    const page = await d.signedIn(owner, `/sites/${site}/timeline?conversation=${conversationId}`);
    await page.getByRole('heading', { name: 'Timeline', level: 1 }).waitFor();
    const list = page.getByRole('list', { name: 'Timeline, oldest first' });
    await list.waitFor();
    const first = list.locator('> li').first();
    expect(await first.innerText()).toMatch(/Visitor[\s\S]*Do you ship to Norway\?/);
    const event = first.locator('.tl-event').filter({ hasText: 'message.created' });
    expect(await event.innerText()).toMatch(/Delivered[\s\S]*Attempt 1\s+Failed\s+500[\s\S]*Attempt 2\s+Failed\s+500[\s\S]*Attempt 3\s+Delivered\s+200/);
    await list.getByText('owner@example.com (you)').waitFor();
    await list.getByText('Yes, we ship to Norway.').waitFor();
    // Not in the navigation.
    expect(await page.getByRole('navigation', { name: 'Site pages' }).getByRole('link').allInnerTexts()).toEqual([
      'Inbox',
      'Keys',
      'Events',
      'Settings',
      'Team',
    ]);

    await event.getByRole('button', { name: `Redeliver ${failedEventId}` }).click();
    await event.getByText('Redelivered: delivered.').waitFor({ timeout: 30_000 });
    await event.getByText(/Attempt 4\s+Delivered/).waitFor();
    await checkPage(page, 'timeline');

    // A kind this page does not know (another helper adds "idempotent replay" entries) is shown, not dropped.
    await page.route('**/manage/v1/sites/*/conversations/*/timeline?*', async (route) => {
      const res = await route.fetch();
      const json = await res.json();
      json.data.push({ type: 'idempotent_replay', at: new Date().toISOString(), messageId: null, idempotencyKey: 'key-123' });
      await route.fulfill({ response: res, json });
    });
    await page.reload();
    await page.getByText('Idempotent replay').waitFor();
    expect(await page.locator('.tl-other').innerText()).toMatch(/idempotencyKey[\s\S]*key-123/);
    await checkPage(page);
    await page.context().close();
  }, 60_000);

  test('an agent: the events page says owners only and calls nothing; the timeline reads without redeliver', async () => {
    const page = await d.signedIn(agent, eventsPath());
    const calls: string[] = [];
    page.on('request', (r) => void (r.url().includes('/manage/v1/') && calls.push(r.url())));
    await page.reload();
    await page.getByText('Owners only.').waitFor();
    expect(calls.filter((u) => /event-address|deliveries/.test(u))).toEqual([]);
    expect(await page.getByRole('navigation', { name: 'Site pages' }).getByRole('link').allInnerTexts()).toEqual(['Inbox']);
    await checkPage(page);

    await page.goto(`${d.origin}/dashboard/sites/${site}/timeline?conversation=${conversationId}`);
    await page.getByText('Do you ship to Norway?').waitFor();
    expect(await page.getByRole('button', { name: /Redeliver/ }).count()).toBe(0);
    await checkPage(page);
    await page.context().close();
  });

  test('a phone-width layout (375x740): the address, the log and the checker fit the screen', async () => {
    const page = await d.signedIn(owner, eventsPath(), { viewport: { width: 375, height: 740 } });
    await page.getByRole('heading', { name: 'Signing secret' }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await checkPage(page, 'events-phone');
    await page.getByRole('link', { name: 'Delivery log' }).click();
    await page.locator('.delivery').first().getByRole('button', { name: 'Show attempts' }).click();
    await page.getByText('Attempt 1').first().waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await checkPage(page, 'deliveries-phone');
    await page.getByRole('link', { name: 'Signature checker' }).click();
    await page.getByLabel('Raw body').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await page.context().close();
  });

  test('no page error in any page visited', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
