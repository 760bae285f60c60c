/** The account commands of the operator CLI, as operators run them: a separate process on the server's database. */
import request from 'supertest';
import { testApp } from '../helpers/test-app';
import { adminCli, AdminCli } from '../helpers/admin-cli';
import type { Runtime } from '../../server/runtime';
import { M, SAME_ORIGIN } from './helpers';

let cli: AdminCli;
let runtime: Runtime;
const admin: AdminCli['admin'] = (args, stdin) => cli.admin(args, stdin);
const adminJson: AdminCli['adminJson'] = (args, stdin) => cli.adminJson(args, stdin);

beforeAll(async () => {
  cli = await adminCli();
  runtime = cli.runtime;
});
afterAll(() => cli.close());

test('the first owner: account create, member add, account list, then sign in through /manage/v1', async () => {
  const site = await adminJson(['site', 'create', '--name', 'Acme']);

  const generated = await adminJson(['account', 'create', '--email', 'Owner@Example.com']);
  expect(generated.account).toMatchObject({ id: expect.stringMatching(/^usr_/), email: 'owner@example.com' });
  expect(generated.password).toMatch(/^[0-9A-Za-z]{24,}$/);
  const stored = await runtime.db('accounts').where({ id: generated.account.id }).first();
  expect(stored.password_hash).toMatch(/^\$scrypt\$ln=17,r=8,p=1\$/); // the CLI hashes at OWASP's cost
  expect(JSON.stringify(stored)).not.toContain(generated.password);

  const typed = await adminJson(['account', 'create', '--email', 'agent@example.com', '--password-stdin'], 'a password typed on stdin\n');
  expect(typed).toEqual({ account: expect.objectContaining({ email: 'agent@example.com' }) }); // nothing to show

  expect(await adminJson(['member', 'add', '--site', site.id, '--email', 'owner@example.com', '--role', 'owner'])).toEqual({
    siteId: site.id,
    accountId: generated.account.id,
    email: 'owner@example.com',
    role: 'owner',
    emailVerified: true, // the operator made it
  });
  await adminJson(['member', 'add', '--site', site.id, '--email', 'agent@example.com', '--role', 'agent']);

  const list = await adminJson(['account', 'list']);
  expect(list.accounts.map((a: { email: string; sites: { role: string }[] }) => `${a.email}:${a.sites.map((s) => s.role).join(',')}`)).toEqual([
    'owner@example.com:owner',
    'agent@example.com:agent',
  ]);

  const app = testApp(runtime.services);
  const owner = await request(app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'owner@example.com', password: generated.password });
  expect(owner.status).toBe(200);
  const agent = await request(app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'agent@example.com', password: 'a password typed on stdin' });
  expect(agent.status).toBe(200);
  const cookie = (owner.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
  const audit = await request(app).get(`${M}/sites/${site.id}/audit-log`).set('Cookie', cookie);
  expect(audit.body.data.map((e: { action: string; actor: { type: string } }) => `${e.action}:${e.actor.type}`)).toEqual([
    'member.added.agent:operator',
    'member.added.owner:operator',
    'site.created:operator',
  ]);
}, 120_000);

test('mistakes are refused with a clear message and no output', async () => {
  const site = await adminJson(['site', 'create', '--name', 'Other']);
  const cases: [string[], RegExp][] = [
    [['account', 'create', '--email', 'not-an-email'], /invalid_request: The email address is not valid/],
    [['account', 'create', '--email', 'owner@example.com'], /invalid_request: An account with this email already exists/],
    [['member', 'add', '--site', site.id, '--email', 'nobody@example.com', '--role', 'agent'], /not_found: No account has verified this email/],
    [['member', 'add', '--site', site.id, '--email', 'owner@example.com', '--role', 'admin'], /--role is one of owner, agent/],
  ];
  for (const [args, message] of cases) {
    const r = await admin([...args, '--json']);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
  }
  const short = await admin(['account', 'create', '--email', 'short@example.com', '--password-stdin', '--json'], 'short\n');
  expect(short.code).not.toBe(0);
  expect(short.stderr).toMatch(/at least 12 characters/);
}, 120_000);

test("the CLI's site and key changes are audited as the operator's, and its keys have no creator", async () => {
  const site = await adminJson(['site', 'create', '--name', 'Audited']);
  await adminJson(['site', 'update', '--site', site.id, '--allowed-origins', 'https://shop.example', '--identity-mode', 'optional']);
  await adminJson(['site', 'update', '--site', site.id, '--identity-secret', 'rotate']);
  const key = await adminJson(['key', 'create', '--site', site.id, '--scopes', 'conversations:read', '--label', 'ops']);
  await adminJson(['key', 'revoke', key.id]);

  const owner = await runtime.services.accounts.registry.create('audit-owner@example.com', 'a long enough password');
  await runtime.services.accounts.members.add({ manager: null, clientIp: null }, site.id, owner.email, 'owner');
  const token = (
    await runtime.services.accounts.tokens.create({ manager: { accountId: owner.id, email: owner.email, via: 'session' }, clientIp: null }, 'audit')
  ).token;
  const app = testApp(runtime.services);
  const audit = await request(app).get(`${M}/sites/${site.id}/audit-log?limit=100`).set('Authorization', `Bearer ${token}`);
  const operator = audit.body.data
    .filter((e: { actor: { type: string } }) => e.actor.type === 'operator')
    .map((e: { action: string; objectId: string }) => `${e.action} ${e.objectId}`);
  // Entries of one millisecond have no order among them: compared as a set.
  expect(operator.sort()).toEqual(
    [
      'member.added.owner ' + owner.id,
      `key.revoked ${key.id}`,
      `key.created ${key.id}`,
      `site.identity_secret_rotated ${site.id}`,
      `site.identity_mode_changed.optional ${site.id}`,
      `site.origins_replaced ${site.id}`,
      `site.created ${site.id}`,
    ].sort(),
  );
  const keys = await request(app).get(`${M}/sites/${site.id}/keys`).set('Authorization', `Bearer ${token}`);
  expect(keys.body.data).toEqual([expect.objectContaining({ id: key.id, label: 'ops', createdBy: null, revokedAt: expect.any(String) })]);
}, 120_000);

test('member add --email finds only a verified account: one made by an invitation is not found until its link is used', async () => {
  const first = await adminJson(['site', 'create', '--name', 'Invited to']);
  const second = await adminJson(['site', 'create', '--name', 'Added to']);
  const inviter = await runtime.services.accounts.registry.create('inviter@example.com', 'a long enough password');
  await runtime.services.accounts.members.add({ manager: null, clientIp: null }, first.id, inviter.email, 'owner');
  const actor = { manager: { accountId: inviter.id, email: inviter.email, via: 'session' as const }, clientIp: null };
  const inv = await runtime.services.accounts.invitations.create(actor, first.id, 'claimed@example.com', 'agent');
  await runtime.services.accounts.invitations.accept(inv.token, { email: 'claimed@example.com', password: 'a long enough password' }, {});

  // The same answer as for an email no account has: the operator cannot tell them apart either.
  const unverified = await admin(['member', 'add', '--site', second.id, '--email', 'claimed@example.com', '--role', 'agent']);
  const unknown = await admin(['member', 'add', '--site', second.id, '--email', 'nobody@example.com', '--role', 'agent']);
  expect(unverified.code).not.toBe(0);
  expect(unverified.stderr.replace('claimed', 'X')).toBe(unknown.stderr.replace('nobody', 'X'));
  expect(unverified.stderr).toMatch(/No account has verified this email/);
  expect((await runtime.db('memberships').where({ site_id: second.id })).length).toBe(0);

  const verified = await admin(['member', 'add', '--site', second.id, '--email', 'inviter@example.com', '--role', 'agent']);
  expect(verified.code).toBe(0);
  // Once its holder used the link emailed to it (the table keeps only hashes: mark it as the link does).
  const claimed = await runtime.db('accounts').where({ email: 'claimed@example.com' }).first('id');
  await runtime.db('accounts').where({ id: claimed.id }).update({ email_verified_at: Date.now() });
  expect(await adminJson(['member', 'add', '--site', second.id, '--email', 'claimed@example.com', '--role', 'agent'])).toMatchObject({
    email: 'claimed@example.com',
    emailVerified: true,
  });
}, 120_000);
