/**
 * The settings, team and account pages in Chromium against the real service over HTTPS: allowed
 * origins, the identity secret, the embed snippet and its check against a real local page; an
 * invitation made in the page and accepted in a second browser, roles, removal, withdrawal, the
 * last-owner rule and the audit log; a password change and management tokens used on the API.
 * Every page visited: no CSP violation, axe clean, a screenshot in test-artifacts/dashboard/.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import type { Page } from 'playwright-core';
import { describeInChromium } from '../helpers/chromium';
import { createEmbedCheck } from '../../server/sites/embed-check';
import { M, newMember } from '../manage/helpers';
import { newId } from '../../server/platform/ids';
import { DashboardHarness, dashboardHarness, violations, PASSWORD, checkPage } from './dashboard/harness';

describeInChromium('settings, team and account pages in Chromium (SQLite pass only)', () => {
  let d: DashboardHarness;
  let shop: http.Server;
  let shopOrigin: string;
  let snippet = '';

  beforeAll(async () => {
    d = await dashboardHarness();
    // The embed check refuses loopback addresses unless WEBHOOK_ALLOW_PRIVATE_NETWORKS is set, which
    // the shared harness does not set: the same check, made with that setting, replaces its method
    // (the route looks `check` up on each request), so it can fetch the local shop below.
    const s = d.h.runtime.services;
    Object.assign(s.embedCheck, createEmbedCheck({ access: s.access, windowUrl: d.origin, publicUrl: d.origin, allowPrivateNetworks: true }));
    // A shop on 127.0.0.1: `/` carries the snippet (read from the API once it is known), `/bare` does not.
    shop = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>Shop</title></head><body><h1>Tea</h1>${req.url === '/' ? snippet : ''}</body></html>`);
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
    shopOrigin = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    shop?.closeAllConnections();
    await new Promise<void>((resolve) => (shop ? shop.close(() => resolve()) : resolve()));
    await d?.close();
  });

  const sitePath = (page: string) => `/sites/${d.site.id}/${page}`;
  /** The status of a request from inside the page (its cookie, same origin). */
  const statusFrom = (page: Page, path: string) => page.evaluate(async (p) => (await fetch(p)).status, path);
  const origins = async () => (await d.h.runtime.services.access.getSite(d.site.id)).allowedOrigins;

  test('settings: allowed origins are validated, added and removed; the identity secret is shown once', async () => {
    const page = await d.signedIn(d.owner, sitePath('settings'));
    await page.getByRole('heading', { name: 'Allowed origins' }).waitFor();
    await page.getByText('The chat window opens only on pages of these origins').waitFor();
    await page.getByText('No allowed origins: the chat window is off.').waitFor();

    // Refused beside the field before any request: a path, then plain http on a public host.
    const field = page.getByLabel('Origin to allow');
    await field.fill('https://shop.example/products');
    await page.getByRole('button', { name: 'Add origin' }).click();
    await page.getByText('An origin has no path: use https://shop.example.').waitFor();
    expect(await field.getAttribute('aria-invalid')).toBe('true');
    await field.fill('http://shop.example');
    await page.getByRole('button', { name: 'Add origin' }).click();
    await page.getByText(/http:\/\/ is only for localhost/).waitFor();
    expect(await origins()).toEqual([]);

    await field.fill('https://shop.example/');
    await page.getByRole('button', { name: 'Add origin' }).click();
    await page.getByRole('list', { name: 'Allowed origins' }).getByText('https://shop.example').waitFor();
    expect(await origins()).toEqual(['https://shop.example']);
    await field.fill(shopOrigin);
    await page.getByRole('button', { name: 'Add origin' }).click();
    await page.getByRole('list', { name: 'Allowed origins' }).getByText(shopOrigin).waitFor();
    expect((await origins()).sort()).toEqual(['https://shop.example', shopOrigin].sort());

    // Removal asks first; Cancel keeps it, the confirmation removes it.
    await page.getByRole('button', { name: 'Remove https://shop.example' }).click();
    const dialog = page.getByRole('dialog', { name: 'Remove https://shop.example?' });
    await dialog.getByText('stops opening on pages of').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await origins()).toContain('https://shop.example');
    await page.getByRole('button', { name: 'Remove https://shop.example' }).click();
    await dialog.getByRole('button', { name: 'Remove origin' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Remove https://shop.example' }).waitFor({ state: 'detached' });
    expect(await origins()).toEqual([shopOrigin]);

    // Identity verification: the modes explained; rotating shows a secret once, and the old one is gone.
    await page.getByText(/Only verified visitors can chat/).waitFor();
    await page.getByRole('button', { name: 'Rotate identity secret' }).click();
    const rotate = page.getByRole('dialog', { name: 'Rotate the identity secret?' });
    await rotate.getByText('The old one stops at once').waitFor();
    await rotate.getByRole('button', { name: 'Rotate secret' }).click();
    const secretBox = page.getByRole('textbox', { name: 'Identity secret' });
    const first = await secretBox.inputValue();
    expect(first).toMatch(/^wis_[0-9A-Za-z]{43,}$/);
    await page
      .getByText(/shown once/)
      .first()
      .waitFor();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(first);
    await page.getByRole('button', { name: 'Rotate identity secret' }).click();
    await rotate.getByRole('button', { name: 'Rotate secret' }).click();
    const second = await secretBox.inputValue();
    expect(second).toMatch(/^wis_/);
    expect(second).not.toBe(first);
    // The mode: saved through the API as chosen.
    await page.getByRole('radio', { name: /Optional/ }).check();
    await page.getByRole('button', { name: 'Save mode' }).click();
    await page.getByRole('region', { name: 'Identity verification' }).getByText('Saved.').waitFor();
    expect((await d.h.runtime.services.access.getSite(d.site.id)).identityMode).toBe('optional');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.context().close();
  });

  test('settings: the embed snippet is copied, and the check finds it on one page and explains its absence on another', async () => {
    const page = await d.signedIn(d.owner, sitePath('settings'));
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.origin });
    const box = page.getByRole('textbox', { name: 'Embed snippet' });
    await box.waitFor();
    snippet = await box.inputValue();
    expect(snippet).toContain(`data-site="${d.site.id}"`);
    await page.getByRole('button', { name: 'Copy snippet' }).click();
    await page.getByText('Copied.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(snippet);

    // A page that carries it: found, no problem.
    const url = page.getByLabel('Page address');
    await url.fill(`${shopOrigin}/`);
    await page.getByRole('button', { name: 'Check page' }).click();
    await page.getByRole('heading', { name: 'The snippet is on this page and nothing the check can see stops the window.' }).waitFor();
    expect(await page.getByRole('list', { name: 'Problems found' }).count()).toBe(0);
    await checkPage(page, 'settings');

    // A page without it: the verdict, then the problem with its code and what to do.
    await url.fill(`${shopOrigin}/bare`);
    await page.getByRole('button', { name: 'Check page' }).click();
    await page.getByRole('heading', { name: 'The snippet is not on this page.' }).waitFor();
    const problems = page.getByRole('list', { name: 'Problems found' });
    expect(await problems.innerText()).toContain('loader_missing');
    await checkPage(page, 'settings-embed-check-problem');
    // A page on an origin the site does not allow: the server's 400, in words.
    await url.fill('https://elsewhere.example/');
    await page.getByRole('button', { name: 'Check page' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /allowed origins/i })
      .waitFor();
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('team: invite an agent (link once), accept in a second browser, change roles, the last owner kept, remove', async () => {
    const page = await d.signedIn(d.owner, sitePath('team'));
    await page.getByRole('heading', { name: 'Members', level: 2 }).waitFor();

    // The only owner cannot step down: the server's own words.
    await page.getByRole('button', { name: `Make agent: ${d.owner.email}` }).click();
    const stepDown = page.getByRole('dialog', { name: `Make ${d.owner.email} agent?` });
    await stepDown.getByText(/Their sessions end/).waitFor();
    await stepDown.getByRole('button', { name: 'Make agent' }).click();
    await page.getByRole('alert').getByText('A site keeps at least one owner: make another member owner first.').waitFor();
    expect(await page.getByRole('alert').innerText()).not.toMatch(/Your role does not allow/);

    // Invite: the link is shown once, and listed as pending (without its link).
    const invitations = page.getByRole('region', { name: 'Invitations', exact: true });
    await invitations.getByLabel('Email').fill('joiner@example.com');
    await invitations.getByLabel('Role').selectOption('agent');
    await invitations.getByRole('button', { name: 'Create invitation' }).click();
    const linkBox = page.getByRole('textbox', { name: 'Invitation link' });
    const link = await linkBox.inputValue();
    expect(link).toMatch(new RegExp(`^${d.origin}/dashboard/accept-invitation#token=[0-9A-Za-z]{43,}$`));
    await page.getByRole('row').filter({ hasText: 'joiner@example.com' }).waitFor();
    await checkPage(page, 'team-invited');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(link.split('#token=')[1]);

    // The invited person, in another browser, accepts with a new password and sees the inbox only.
    const joiner = await (await d.newContext()).newPage();
    await joiner.goto(link);
    await joiner.getByRole('heading', { name: 'Accept an invitation' }).waitFor();
    await joiner.getByLabel(/Email/).fill('joiner@example.com');
    await joiner.getByLabel('Password').fill('the joiner’s own password');
    await joiner.getByRole('button', { name: 'Accept invitation' }).click();
    await joiner.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    expect(await joiner.getByRole('navigation', { name: 'Site pages' }).getByRole('link').allInnerTexts()).toEqual(['Inbox']);
    expect(await statusFrom(joiner, '/manage/v1/me')).toBe(200);

    // Back to the owner: the new member is listed; made owner, their session ends.
    await page.reload();
    const membersRegion = page.getByRole('region', { name: 'Members', exact: true });
    const row = membersRegion.getByRole('row').filter({ hasText: 'joiner@example.com' });
    await row.getByRole('cell', { name: 'agent', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Make owner: joiner@example.com' }).click();
    const promote = page.getByRole('dialog', { name: 'Make joiner@example.com owner?' });
    await promote.getByText('Their sessions end, so the new role applies when they sign in again.').waitFor();
    await promote.getByRole('button', { name: 'Make owner' }).click();
    await page.getByText('joiner@example.com is now owner; their sessions ended.').waitFor();
    expect(await statusFrom(joiner, '/manage/v1/me')).toBe(401);
    const joinerId = (await d.h.runtime.db('accounts').where({ email: 'joiner@example.com' }).first()).id as string;
    expect(await d.h.runtime.db('memberships').where({ site_id: d.site.id, account_id: joinerId }).first()).toMatchObject({ role: 'owner' });

    // Removed: asked first, gone from the list and from the site.
    await page.getByRole('button', { name: 'Remove joiner@example.com' }).click();
    const remove = page.getByRole('dialog', { name: 'Remove joiner@example.com?' });
    await remove.getByRole('button', { name: 'Remove member' }).click();
    await page.getByText('joiner@example.com was removed from the site.').waitFor();
    expect(await row.count()).toBe(0);
    const members = await d.h.runtime.db('memberships').where({ site_id: d.site.id }).select('account_id');
    expect(members.map((m: { account_id: string }) => m.account_id)).not.toContain(joinerId);
    await joiner.context().close();
    await page.context().close();
  });

  test('team: a pending invitation is withdrawn and its link refused; an owner ends a member’s sessions; the audit log shows it all', async () => {
    const agentPage = await d.signedIn(d.agent);
    expect(await statusFrom(agentPage, '/manage/v1/me')).toBe(200);

    const page = await d.signedIn(d.owner, sitePath('team'));
    await page.getByLabel('Email').fill('withdrawn@example.com');
    await page.getByRole('button', { name: 'Create invitation' }).click();
    const link = await page.getByRole('textbox', { name: 'Invitation link' }).inputValue();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    const pendingRow = page.getByRole('row').filter({ hasText: 'withdrawn@example.com' });
    await pendingRow.waitFor();
    await page.getByRole('button', { name: 'Withdraw the invitation of withdrawn@example.com' }).click();
    const withdraw = page.getByRole('dialog', { name: 'Withdraw the invitation of withdrawn@example.com?' });
    await withdraw.getByRole('button', { name: 'Withdraw invitation' }).click();
    await pendingRow.waitFor({ state: 'detached' });
    const listed = await page.evaluate(async (siteId) => (await (await fetch(`/manage/v1/sites/${siteId}/invitations`)).json()).data, d.site.id);
    expect(listed.map((i: { email: string }) => i.email)).not.toContain('withdrawn@example.com');

    // The withdrawn link, opened: refused with the server's explanation, no account joined.
    const late = await (await d.newContext()).newPage();
    await late.goto(link);
    await late.getByLabel(/Email/).fill('withdrawn@example.com');
    await late.getByLabel('Password').fill('a long enough new password');
    await late.getByRole('button', { name: 'Accept invitation' }).click();
    await late.getByRole('alert').waitFor();
    expect(await late.getByRole('heading', { name: 'Accept an invitation' }).count()).toBe(1);
    expect(await d.h.runtime.db('accounts').where({ email: 'withdrawn@example.com' }).first()).toBeUndefined();
    await late.context().close();

    // An owner signs the agent out everywhere.
    await page.getByRole('button', { name: `End sessions of ${d.agent.email}` }).click();
    await page
      .getByRole('dialog', { name: `End the sessions of ${d.agent.email}?` })
      .getByRole('button', { name: 'End sessions' })
      .click();
    await page.getByText(`1 session of ${d.agent.email} ended.`).waitFor();
    expect(await statusFrom(agentPage, '/manage/v1/me')).toBe(401);
    await agentPage.context().close();

    // The audit log: each action with who, what and from where; newest first.
    const audit = page.getByRole('region', { name: 'Audit log', exact: true });
    await audit.getByText('member.sessions_ended').waitFor();
    const text = await audit.innerText();
    for (const action of [
      'invitation.created.agent',
      'invitation.accepted.agent',
      'member.role_changed.owner',
      'member.removed',
      'invitation.revoked',
      'member.sessions_ended',
      'site.origin_added',
      'site.origin_removed',
      'site.identity_secret_rotated',
    ])
      expect(text).toContain(action);
    const newest = audit.getByRole('row').nth(1);
    expect(await newest.innerText()).toContain(`${d.owner.email} (you)`);
    expect(await newest.innerText()).toContain('member.sessions_ended');
    expect(await newest.getByTitle(d.agent.id).innerText()).toBe(d.agent.email);
    expect(await newest.innerText()).toMatch(/127\.0\.0\.1|::1|::ffff:127\.0\.0\.1/);
    await checkPage(page, 'team');
    await page.context().close();
  });

  test('team at phone width: nothing wider than the screen', async () => {
    const page = await d.signedIn(d.owner, sitePath('team'), { viewport: { width: 375, height: 740 } });
    await page.getByRole('region', { name: 'Audit log', exact: true }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await checkPage(page, 'team-phone');
    await page.context().close();
  });

  test('an agent opening settings or team by address sees owners only, and no call is made', async () => {
    // Signed in on the settings address itself: the inbox (where a plain sign-in lands) asks for the
    // members for its assignment picker, which would race the recorder below.
    const page = await d.signedIn(d.agent, sitePath('settings'));
    const calls: string[] = [];
    page.on('request', (r) => {
      if (/\/manage\/v1\/sites\/[^/]+\/(members|invitations|audit-log|allowed-origins|embed)|\/manage\/v1\/sites\/[^/]+$/.test(r.url())) calls.push(r.url());
    });
    for (const p of ['settings', 'team']) {
      await page.goto(`${d.origin}/dashboard${sitePath(p)}`);
      await page.getByText('Owners only.').waitFor();
      expect(await page.locator('table, form').count()).toBe(0);
    }
    expect(calls).toEqual([]);
    expect(await statusFrom(page, `/manage/v1/sites/${d.site.id}/audit-log`)).toBe(403);
    await checkPage(page, 'agent-team-owners-only');
    await page.context().close();
  });

  test('account: sessions listed and one ended; a password change ends the others and the old password fails', async () => {
    await newMember(d.h, d.site.id, 'person@example.com', 'agent');
    const person = { id: '', email: 'person@example.com' };
    const other = await d.signedIn(person);
    const page = await d.signedIn(person, '/account');
    await page.getByRole('heading', { name: 'Account', level: 1 }).waitFor();
    const sessions = page.getByRole('region', { name: 'My sessions', exact: true });
    await sessions.getByRole('row').nth(2).waitFor();
    expect(await sessions.getByRole('row').count()).toBe(3); // the header and two sessions
    expect(await sessions.getByText('This browser').count()).toBe(1);
    // The other browser's session ended from here; that browser is signed out.
    await sessions.getByRole('button', { name: /^End session of/ }).click();
    await page.getByText(/is ended: that browser is signed out/).waitFor();
    expect(await statusFrom(other, '/manage/v1/me')).toBe(401);

    // Signed in again there, then the password changes here: that session ends, this one stays.
    await other.reload();
    await d.signIn(other, person.email);
    await other.getByRole('heading', { name: 'Inbox', level: 1 }).waitFor();
    await page.reload();
    await sessions.getByRole('row').nth(2).waitFor();
    await page.getByRole('form', { name: 'Change password' }).getByLabel('Current password').fill('not it at all');
    await page.getByLabel('New password').fill('a brand new password 42');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('alert').getByText('The current password is wrong.').waitFor();
    expect(await page.getByRole('alert').innerText()).not.toMatch(/role/);
    expect(await statusFrom(other, '/manage/v1/me')).toBe(200); // nothing changed
    await page.getByRole('form', { name: 'Change password' }).getByLabel('Current password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText(/Every other session of your account was signed out; this one stays/).waitFor();
    expect(await statusFrom(other, '/manage/v1/me')).toBe(401);
    expect(await statusFrom(page, '/manage/v1/me')).toBe(200);
    await sessions.getByRole('row').nth(2).waitFor({ state: 'detached' }); // read again: this browser's alone
    expect(await sessions.getByRole('row').count()).toBe(2);

    const signIn = (password: string) => request(d.h.app).post(`${M}/session`).set('Sec-Fetch-Site', 'same-origin').send({ email: person.email, password });
    expect((await signIn(PASSWORD)).status).toBe(401);
    expect((await signIn('a brand new password 42')).status).toBe(200);
    await other.context().close();
    await page.context().close();
  });

  test('account: a management token made in the page works as Bearer on /manage/v1/me until revoked', async () => {
    const page = await d.signedIn(d.owner, '/account');
    await page.getByLabel('Token label').fill('deploy script');
    await page.getByRole('button', { name: 'Create token' }).click();
    const token = await page.getByRole('textbox', { name: 'Management token' }).inputValue();
    expect(token).toMatch(/^wcm_[0-9A-Za-z]{43,}$/);
    const me = () => request(d.h.app).get(`${M}/me`).set('Authorization', `Bearer ${token}`);
    const ok = await me();
    expect(ok.status).toBe(200);
    expect(ok.body.data.via).toBe('token');
    expect(ok.body.data.account.email).toBe(d.owner.email);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(token);

    // Listed with its last use once the page reads the list again.
    await page.reload();
    const row = page.getByRole('row').filter({ hasText: 'deploy script' });
    await row.waitFor();
    expect(await row.innerText()).not.toMatch(/never/);
    await checkPage(page, 'account');

    await page.getByRole('button', { name: 'Revoke deploy script' }).click();
    await page.getByRole('dialog', { name: 'Revoke “deploy script”?' }).getByRole('button', { name: 'Revoke token' }).click();
    await row.getByText('Revoked').waitFor();
    expect((await me()).status).toBe(401);
    await page.context().close();
  });

  test("the audit log pages by its cursor; a token's action names the token and its account", async () => {
    const db = d.h.runtime.db;
    const day = Date.now() - 86_400_000;
    const rows = Array.from({ length: 60 }, (_, i) => ({
      id: newId('aud', day - i * 1000),
      site_id: d.site.id,
      created_at: day - i * 1000,
      actor_account_id: d.owner.id,
      actor_token_id: i === 59 ? 'mtk_01m8b0a8mvbhvwq01gcb7zpw5q' : null,
      action: 'site.renamed',
      object_id: d.site.id,
      client_ip: '203.0.113.9',
    }));
    await db('audit_log').insert(rows);
    const total = Number((await db('audit_log').where({ site_id: d.site.id }).count({ n: '*' }).first())!.n);
    expect(total).toBeGreaterThan(60);

    const page = await d.signedIn(d.owner, sitePath('team'));
    const audit = page.getByRole('region', { name: 'Audit log', exact: true });
    const more = audit.getByRole('button', { name: 'Show older entries' });
    await more.waitFor();
    expect(await audit.getByRole('row').count()).toBe(1 + 50); // the header and the first page
    await more.click();
    await more.waitFor({ state: 'detached' }); // the last page: no cursor left
    expect(await audit.getByRole('row').count()).toBe(1 + total);
    const oldest = audit.getByRole('row').last();
    expect(await oldest.innerText()).toContain(`${d.owner.email} (you), by token mtk_01m8b0a8mvbhvwq01gcb7zpw5q`);
    expect(await oldest.innerText()).toContain('203.0.113.9');
    expect(await violations(page)).toEqual([]);
    await page.context().close();
  });

  test('no page error in any page visited', () => {
    expect(d.pageErrors).toEqual([]);
  });
});
