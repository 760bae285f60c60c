/**
 * The first-start setup link (docs/manage.md, "The first owner"): one use makes the first owner of
 * every site and signs it in; a used, replaced or expired link is 404; two uses at once make one
 * owner; an account made another way ends the link; cross-site posts are refused like a sign-in.
 * The real app on both engines.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { cookieOf, M, manageHarness, newAccount, PASSWORD, SAME_ORIGIN } from './helpers';
import { SETUP_LINK_TTL_MS } from '../../server/accounts/setup';
import { sha256Hex } from '../../server/platform/crypto';
import { accountCommands } from '../../server/cli/commands/accounts';
import { parseArgs } from '../../server/cli/args';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);

beforeAll(async () => {
  h = await manageHarness({ now: () => clock });
});
afterAll(() => h.close());

/** Back to a service with no account (each test starts as a first start does). */
async function noAccounts() {
  const db = h.runtime.db;
  for (const table of ['memberships', 'sessions', 'management_tokens', 'audit_log', 'security_log', 'accounts']) await db(table).del();
}

const accounts = () => h.runtime.services.accounts;

/** The token in a setup link's fragment. */
function tokenOf(link: { url: string }) {
  const url = new URL(link.url);
  expect(url.pathname).toBe('/dashboard/setup');
  expect(url.search).toBe('');
  const token = /^#token=([0-9A-Za-z]{43})$/.exec(url.hash)?.[1];
  expect(token).toBeDefined();
  return token!;
}

const setup = (token: string, email: string, headers: Record<string, string> = SAME_ORIGIN) =>
  request(h.app).post(`${M}/setup`).set(headers).send({ token, email, password: PASSWORD });

beforeEach(async () => {
  await noAccounts();
});

test('the link makes the first owner of every site, signed in; only its hash is stored; it works once', async () => {
  const second = await h.newSite('Second site');
  const link = (await accounts().setup.issueLink())!;
  expect(link.expiresAt).toBe(new Date(clock + SETUP_LINK_TTL_MS).toISOString());
  const token = tokenOf(link);
  const rows = await h.runtime.db('setup_links').select();
  expect(rows).toHaveLength(1);
  expect(JSON.stringify(rows)).not.toContain(token);

  const made = await setup(token, 'First@Example.com');
  expect(made.status).toBe(201);
  expect(made.body.data.account).toMatchObject({ email: 'first@example.com' });
  expect(made.body.data.sites.map((s: { id: string; role: string }) => [s.id, s.role]).sort()).toEqual(
    [
      [h.site.id, 'owner'],
      [second.id, 'owner'],
    ].sort(),
  );
  // The answer signed it in: the cookie opens /me.
  const me = await request(h.app).get(`${M}/me`).set('Cookie', cookieOf(made));
  expect(me.status).toBe(200);
  expect(me.body.data.account.id).toBe(made.body.data.account.id);
  // It can sign in with the password it chose.
  expect((await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'first@example.com', password: PASSWORD })).status).toBe(200);
  // The audit log of each site says who became owner.
  const log = await request(h.app).get(`${M}/sites/${second.id}/audit-log`).set('Cookie', cookieOf(made));
  expect(log.body.data.map((e: { action: string }) => e.action)).toEqual(['member.added.owner']);

  // Used: the same link again is 404, and no new link is issued while an account exists.
  const again = await setup(token, 'second@example.com');
  expect(again.status).toBe(404);
  expect(again.body.error.code).toBe('not_found');
  expect(await h.runtime.db('setup_links').select()).toEqual([]);
  expect(await accounts().setup.issueLink()).toBeNull();
  expect(await h.runtime.db('accounts').count({ n: '*' }).first()).toMatchObject({ n: 1 });
});

test('an expired link is 404; a restart prints a new link and the old one stops', async () => {
  const old = tokenOf((await accounts().setup.issueLink())!);
  const fresh = tokenOf((await accounts().setup.issueLink())!); // the next start
  expect((await setup(old, 'a@example.com')).status).toBe(404);

  clock += SETUP_LINK_TTL_MS; // 24 hours later, to the millisecond: expired
  expect((await setup(fresh, 'a@example.com')).status).toBe(404);
  clock -= 1;
  const ok = await setup(fresh, 'a@example.com');
  expect(ok.status).toBe(201);
  clock += 1;
  // Unknown tokens and wrong shapes: 404 and 400, nothing made.
  await noAccounts();
  await accounts().setup.issueLink();
  expect((await setup('A'.repeat(43), 'b@example.com')).status).toBe(404);
  expect((await setup('not a token!', 'b@example.com')).status).toBe(400);
  expect(
    (
      await request(h.app)
        .post(`${M}/setup`)
        .set(SAME_ORIGIN)
        .send({ token: 'A'.repeat(43), email: 'b@example.com' })
    ).status,
  ).toBe(400);
  expect(await h.runtime.db('accounts').select('id')).toEqual([]);
});

test('two uses at once make one owner; the other is 404', async () => {
  const token = tokenOf((await accounts().setup.issueLink())!);
  const answers = await Promise.all([setup(token, 'one@example.com'), setup(token, 'two@example.com'), setup(token, 'three@example.com')]);
  expect(answers.map((a) => a.status).sort()).toEqual([201, 404, 404]);
  const accountsMade = await h.runtime.db('accounts').select('email');
  expect(accountsMade).toHaveLength(1);
  const owners = await h.runtime.db('memberships').where({ site_id: h.site.id, role: 'owner' }).select('account_id');
  expect(owners).toHaveLength(1);
});

test('several instances starting at once: one link is valid, the others are 404', async () => {
  const links = await Promise.all([accounts().setup.issueLink(), accounts().setup.issueLink(), accounts().setup.issueLink()]);
  const tokens = links.map((l) => tokenOf(l!));
  expect(await h.runtime.db('setup_links').select('id')).toHaveLength(1);
  // Which one is valid: the row's hash tells, without using any.
  const { token_hash } = await h.runtime.db('setup_links').first('token_hash');
  const valid = tokens.filter((t) => sha256Hex(t) === token_hash);
  expect(valid).toHaveLength(1);
  for (const t of tokens.filter((x) => x !== valid[0])) expect((await setup(t, 'x@example.com')).status).toBe(404);
  expect((await setup(valid[0], 'x@example.com')).status).toBe(201);
});

test('an account made by the CLI (or an invitation) first ends the link', async () => {
  const token = tokenOf((await accounts().setup.issueLink())!);
  await newAccount(h, 'operator-made@example.com'); // the CLI's `account create`
  expect(await h.runtime.db('setup_links').select()).toEqual([]);
  expect((await setup(token, 'late@example.com')).status).toBe(404);
  expect(await h.runtime.db('memberships').select()).toEqual([]);

  // A link issued while an account exists (a row left by hand) still makes no owner.
  await h.runtime.db('setup_links').insert({ id: 'first-owner', token_hash: sha256Hex('B'.repeat(43)), created_at: clock, expires_at: clock + 1000 });
  expect((await setup('B'.repeat(43), 'late@example.com')).status).toBe(404);
  expect(await h.runtime.db('memberships').select()).toEqual([]);
});

test('the CLI and the link at once: never two owners made by the link, and the link dies either way', async () => {
  for (let i = 0; i < 5; i++) {
    await noAccounts();
    const token = tokenOf((await accounts().setup.issueLink())!);
    const [used] = await Promise.all([setup(token, `link-${i}@example.com`), newAccount(h, `cli-${i}@example.com`)]);
    expect([201, 404]).toContain(used.status);
    expect(await h.runtime.db('setup_links').select()).toEqual([]);
    const owners = await h.runtime.db('memberships').where({ role: 'owner' }).distinct('account_id');
    expect(owners.length).toBe(used.status === 201 ? 1 : 0);
  }
});

test('a post from another site is refused before the link is looked at (login CSRF), like a sign-in', async () => {
  const token = tokenOf((await accounts().setup.issueLink())!);
  const cross = await setup(token, 'victim@example.com', { 'Sec-Fetch-Site': 'cross-site' });
  expect(cross.status).toBe(403);
  expect(cross.body.error.code).toBe('cross_site_request');
  const noHeaders = await request(h.app).post(`${M}/setup`).send({ token, email: 'victim@example.com', password: PASSWORD });
  expect(noHeaders.status).toBe(403);
  // The link is still good for its owner.
  expect((await setup(token, 'owner@example.com', { Origin: 'https://localhost:8443' })).status).toBe(201);
});

test("the CLI's `setup link` prints a fresh link (ending the one before) while no account exists, and refuses after", async () => {
  const older = tokenOf((await accounts().setup.issueLink())!);
  const printed = (await accountCommands['setup link'].run(h.runtime, parseArgs([]))).json as { url: string };
  const fresh = tokenOf(printed);
  expect((await setup(older, 'a@example.com')).status).toBe(404);
  expect((await setup(fresh, 'a@example.com')).status).toBe(201);
  await expect(accountCommands['setup link'].run(h.runtime, parseArgs([]))).rejects.toThrow(/an account exists already/);
});
