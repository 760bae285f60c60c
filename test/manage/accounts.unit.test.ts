/**
 * The accounts services' rules, each service over the in-memory accounts store
 * (test/fakes/fake-account-store.ts) and a fake clock, wired as the composition root wires them:
 * no database, no server.
 */
import { randomBytes } from 'node:crypto';
import { accountServices } from '../../server/services';
import { createPasswordHasher } from '../../server/accounts/passwords';
import { createCursorCodec } from '../../server/platform/cursor';
import { SESSION_ABSOLUTE_MS, SESSION_IDLE_MS } from '../../server/accounts/session-rules';
import { INVITATION_TTL_MS } from '../../server/accounts/invitations';
import { SETUP_LINK_TTL_MS } from '../../server/accounts/setup';
import { CLI_ACTOR, type Manager, type SignedActor } from '../../server/accounts/common';
import { fakeAccountStore } from '../fakes/fake-account-store';

const T0 = Date.UTC(2026, 10, 26, 9, 0, 0);
const MIN = 60_000;
const PASSWORD = 'correct horse battery staple';
const SITE = 'ws_00000000000000000000000001';

function world() {
  let clock = T0;
  const fake = fakeAccountStore();
  fake.addSite(SITE, 'Shop');
  const services = accountServices(fake.store, {
    sites: { findSite: async (id: string) => (id === SITE ? ({ id } as never) : undefined) },
    cursors: createCursorCodec(randomBytes(32)),
    publicUrl: 'https://chat.example.com',
    now: () => clock,
    hasher: createPasswordHasher({ N: 2 ** 10, r: 8, p: 1 }),
  });
  const advance = (ms: number) => void (clock += ms);
  /** An account that is `role` of SITE, made as the operator CLI makes it. */
  const member = async (email: string, role: 'owner' | 'agent') => {
    const account = await services.registry.create(email, PASSWORD);
    await services.members.add(CLI_ACTOR, SITE, email, role);
    const manager: Manager = { accountId: account.id, email, via: 'session' };
    const actor: SignedActor = { manager, clientIp: null };
    return { ...account, manager, actor };
  };
  return { fake, services, advance, member, tokenOf: (url: string) => new URL(url).hash.replace('#token=', '') };
}

/** The error an async call throws, as its code and message. */
async function refusal(p: Promise<unknown>) {
  const err = await p.then(
    () => undefined,
    (e: { code?: string; message?: string }) => e,
  );
  if (!err) throw new Error('expected a refusal, got an answer');
  return { code: err.code, message: err.message };
}

describe('sign-in', () => {
  test('a session unused for 30 minutes ends; each use within them moves the limit', async () => {
    const { services, advance, member } = world();
    await member('a@example.com', 'agent');
    const { token } = await services.signIn.signIn('a@example.com', PASSWORD, {});
    advance(SESSION_IDLE_MS - MIN);
    await expect(services.signIn.authenticate(token)).resolves.toMatchObject({ via: 'session' });
    advance(SESSION_IDLE_MS - MIN); // 58 minutes in, 29 after the last use
    await expect(services.signIn.authenticate(token)).resolves.toMatchObject({ via: 'session' });
    advance(SESSION_IDLE_MS);
    expect(await refusal(services.signIn.authenticate(token))).toEqual({ code: 'unauthorized', message: 'The session has expired; sign in again.' });
  });

  test('however often it is used, a session ends 12 hours after sign-in, and is no longer listed', async () => {
    const { services, advance, member } = world();
    const a = await member('a@example.com', 'agent');
    const { token } = await services.signIn.signIn('a@example.com', PASSWORD, {});
    for (let used = 0; used < SESSION_ABSOLUTE_MS - 20 * MIN; used += 20 * MIN) {
      await services.signIn.authenticate(token);
      advance(20 * MIN);
    }
    await expect(services.signIn.authenticate(token)).resolves.toBeDefined();
    advance(20 * MIN);
    expect((await refusal(services.signIn.authenticate(token))).code).toBe('unauthorized');
    expect(await services.signIn.listSessions(a.manager)).toEqual([]);
  });

  test('a wrong password and an unknown email get the same answer, each after one hash', async () => {
    const { services, member } = world();
    await member('a@example.com', 'agent');
    const verify = jest.spyOn(services.signIn.hasher, 'verify');
    const nothing = jest.spyOn(services.signIn.hasher, 'verifyNothing');
    const wrong = await refusal(services.signIn.signIn('a@example.com', 'a wrong password!', {}));
    const unknown = await refusal(services.signIn.signIn('nobody@example.com', 'a wrong password!', {}));
    expect(unknown).toEqual(wrong);
    expect([verify.mock.calls.length, nothing.mock.calls.length]).toEqual([1, 1]);
  });

  test('a password change ends every other session of the account, not the one making it', async () => {
    const { services, member, fake } = world();
    const a = await member('a@example.com', 'agent');
    const mine = await services.signIn.signIn('a@example.com', PASSWORD, {});
    await services.signIn.signIn('a@example.com', PASSWORD, {});
    const manager = { ...a.manager, sessionId: mine.session.id };
    await services.signIn.changePassword({ manager, clientIp: null }, PASSWORD, 'the next long password');
    expect(fake.sessions().map((s) => s.id)).toEqual([mine.session.id]);
    expect(fake.audit().map((r) => r.action)).toContain('account.password_changed');
  });
});

describe('members', () => {
  test('the last owner can neither be demoted nor removed; with a second owner, either can', async () => {
    const { services, member } = world();
    const owner = await member('owner@example.com', 'owner');
    const lastOwner = { code: 'forbidden', message: 'A site keeps at least one owner: make another member owner first.' };
    expect(await refusal(services.members.changeRole(owner.actor, SITE, owner.id, 'agent'))).toEqual(lastOwner);
    expect(await refusal(services.members.remove(owner.actor, SITE, owner.id))).toEqual(lastOwner);
    const second = await member('second@example.com', 'owner');
    await expect(services.members.changeRole(owner.actor, SITE, owner.id, 'agent')).resolves.toMatchObject({ role: 'agent' });
    expect(await refusal(services.members.remove(second.actor, SITE, second.id))).toEqual(lastOwner);
  });

  test("a role change ends the member's sessions; the same role again changes nothing", async () => {
    const { services, member, fake } = world();
    const owner = await member('owner@example.com', 'owner');
    const agent = await member('agent@example.com', 'agent');
    await services.signIn.signIn('agent@example.com', PASSWORD, {});
    await services.members.changeRole(owner.actor, SITE, agent.id, 'agent');
    expect(fake.sessions()).toHaveLength(1);
    await services.members.changeRole(owner.actor, SITE, agent.id, 'owner');
    expect(fake.sessions()).toHaveLength(0);
    expect(fake.audit().filter((r) => r.action.startsWith('member.role_changed'))).toHaveLength(1);
  });

  test('a live stream is refused once the member is removed or its token revoked', async () => {
    const { services, member } = world();
    const owner = await member('owner@example.com', 'owner');
    const agent = await member('agent@example.com', 'agent');
    const t = await services.tokens.create(agent.actor, 'script');
    const byToken = await services.tokens.authenticate(t.token);
    expect(await services.members.refusalOf(byToken, SITE)).toBeNull();
    await services.tokens.revoke(agent.actor, t.id);
    expect(await services.members.refusalOf(byToken, SITE)).toBe('the token was revoked');
    await services.members.remove(owner.actor, SITE, agent.id);
    expect(await services.members.refusalOf(byToken, SITE)).toBe('no longer a member of the site');
  });
});

describe('invitations', () => {
  test('an invitation is taken once', async () => {
    const { services, member, tokenOf } = world();
    const owner = await member('owner@example.com', 'owner');
    const inv = await services.invitations.create(owner.actor, SITE, 'new@example.com', 'agent');
    const joined = await services.invitations.accept(tokenOf(inv.url), { email: 'new@example.com', password: PASSWORD }, {});
    expect(joined.site).toMatchObject({ id: SITE, role: 'agent' });
    expect(joined.session).toBeDefined();
    const again = await refusal(services.invitations.accept(tokenOf(inv.url), { email: 'new@example.com', password: PASSWORD }, {}));
    expect(again).toEqual({ code: 'not_found', message: 'This invitation does not exist, was used or has expired.' });
  });

  test('an invitation expires after 7 days, and is no longer listed', async () => {
    const { services, member, advance, tokenOf } = world();
    const owner = await member('owner@example.com', 'owner');
    const inv = await services.invitations.create(owner.actor, SITE, 'new@example.com', 'agent');
    advance(INVITATION_TTL_MS - 1);
    expect((await services.invitations.list(SITE, {})).data).toHaveLength(1);
    advance(1);
    expect((await services.invitations.list(SITE, {})).data).toHaveLength(0);
    expect((await refusal(services.invitations.accept(tokenOf(inv.url), { email: 'new@example.com', password: PASSWORD }, {}))).code).toBe('not_found');
  });

  test('an invitation is for its email only, and a failed try does not use it up', async () => {
    const { services, member, tokenOf } = world();
    const owner = await member('owner@example.com', 'owner');
    const inv = await services.invitations.create(owner.actor, SITE, 'new@example.com', 'agent');
    expect((await refusal(services.invitations.accept(tokenOf(inv.url), { email: 'other@example.com', password: PASSWORD }, {}))).code).toBe('invalid_request');
    await expect(services.invitations.accept(tokenOf(inv.url), { email: 'new@example.com', password: PASSWORD }, {})).resolves.toBeDefined();
  });
});

describe('tokens', () => {
  test('a revoked token authenticates no more; revoking it again writes no second entry', async () => {
    const { services, member, fake } = world();
    const a = await member('a@example.com', 'agent');
    const t = await services.tokens.create(a.actor, 'script');
    await expect(services.tokens.authenticate(t.token)).resolves.toMatchObject({ accountId: a.id, via: 'token', tokenId: t.id });
    await services.tokens.revoke(a.actor, t.id);
    await services.tokens.revoke(a.actor, t.id);
    expect((await refusal(services.tokens.authenticate(t.token))).code).toBe('unauthorized');
    expect(fake.audit().filter((r) => r.action === 'token.revoked')).toHaveLength(1);
    expect((await services.tokens.list(a.manager))[0].revokedAt).not.toBeNull();
  });

  test("another account's token is 404 to revoke, like a missing one, and stays valid", async () => {
    const { services, member } = world();
    const a = await member('a@example.com', 'agent');
    const b = await member('b@example.com', 'agent');
    const t = await services.tokens.create(a.actor, 'script');
    expect(await refusal(services.tokens.revoke(b.actor, t.id))).toEqual({ code: 'not_found', message: 'Token not found.' });
    await expect(services.tokens.authenticate(t.token)).resolves.toMatchObject({ accountId: a.id });
  });
});

describe('setup', () => {
  test('the setup link makes one first owner, once', async () => {
    const { services, tokenOf } = world();
    const link = (await services.setup.issueLink())!;
    const made = await services.setup.complete(tokenOf(link.url), 'first@example.com', PASSWORD, {});
    expect(made.sites).toEqual([expect.objectContaining({ id: SITE, role: 'owner' })]);
    const gone = await refusal(services.setup.complete(tokenOf(link.url), 'second@example.com', PASSWORD, {}));
    expect(gone.code).toBe('not_found');
    expect(await services.setup.issueLink()).toBeNull();
  });

  test('a setup link expires after 24 hours, and any account made another way ends it', async () => {
    const first = world();
    const expired = (await first.services.setup.issueLink())!;
    first.advance(SETUP_LINK_TTL_MS);
    expect((await refusal(first.services.setup.complete(first.tokenOf(expired.url), 'a@example.com', PASSWORD, {}))).code).toBe('not_found');

    const second = world();
    const link = (await second.services.setup.issueLink())!;
    await second.services.registry.create('cli@example.com', PASSWORD);
    expect((await refusal(second.services.setup.complete(second.tokenOf(link.url), 'a@example.com', PASSWORD, {}))).code).toBe('not_found');
  });
});
