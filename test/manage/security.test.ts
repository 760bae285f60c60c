/**
 * Issue 24, items 4 to 6 through the real app (response validation on), on a fake clock: the
 * account's security log; the lock-out an attacker causes by knowing an email, and the device
 * cookie that lets the owner's browser through; the signed-in password proof on a budget of its
 * own; and the sudo window, checked for every operation the document marks `x-sudo`.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { cookieOf, M, manageHarness, newAccount, newMember, newToken, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { SIGN_IN_LIMITS } from '../../server/accounts/throttle';
import { SUDO_WINDOW_MS } from '../../server/accounts/session-rules';
import { SECURITY_LOG_RETENTION_MS } from '../../server/accounts/security-log';

let h: Harness;
let clock = Date.UTC(2026, 10, 27, 9, 0, 0);
const MIN = 60_000;

beforeAll(async () => {
  // Every reading moves the clock on a millisecond, so the log's order is the order of the steps.
  h = await manageHarness({ now: () => ++clock, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
});
afterAll(() => h.close());

/** Every cookie a sign-in set, as `name=value`, by name. */
function cookiesOf(res: request.Response): Record<string, string> {
  const set = (res.headers['set-cookie'] as unknown as string[] | undefined) ?? [];
  return Object.fromEntries(set.map((c) => c.split(';')[0]).map((c) => [c.slice(0, c.indexOf('=')), c]));
}

const post = (p: string, body: object, cookie?: string) => {
  const r = request(h.app).post(`${M}${p}`).set(SAME_ORIGIN);
  return (cookie ? r.set('Cookie', cookie) : r).send(body);
};
const signInWith = (email: string, password: string, cookie?: string) => post('/session', { email, password }, cookie).set('User-Agent', 'test-browser/1');
const logOf = async (cookie: string) => {
  const res = await request(h.app).get(`${M}/security-log`).set('Cookie', cookie);
  expect(res.status).toBe(200);
  return res.body.data as { action: string; clientAddress: string | null; userAgent: string | null; sessionId: string | null; tokenId: string | null }[];
};
/** Spends an email's sign-in budget as an attacker would, from clients without a device cookie. */
async function lockOut(email: string) {
  for (let i = 0; i < SIGN_IN_LIMITS.perEmail.limit; i++) expect((await signInWith(email, 'a wrong guess, again')).status).toBe(401);
  expect((await signInWith(email, PASSWORD)).status).toBe(429);
}

describe('security log', () => {
  test('sign-ins, failed ones, tokens, password confirmations and sign-out, newest first, each with address and agent', async () => {
    const account = await newAccount(h, 'log@example.com');
    expect((await signInWith('log@example.com', 'not the password at all')).status).toBe(401);
    const signed = await signInWith('log@example.com', PASSWORD);
    const cookie = cookiesOf(signed)['__Host-session'];
    const session = signed.body.data.session.id as string;
    const token = await newToken(h, cookie);
    expect((await request(h.app).delete(`${M}/tokens/${token.id}`).set(SAME_ORIGIN).set('Cookie', cookie)).status).toBe(204);
    expect((await post('/session/sudo', { password: 'still not the password' }, cookie)).status).toBe(403);
    expect((await post('/session/sudo', { password: PASSWORD }, cookie)).status).toBe(200);

    const log = await logOf(cookie);
    expect(log.map((e) => e.action)).toEqual(['sudo.granted', 'sudo.refused', 'token.revoked', 'token.created', 'session.signed_in', 'session.sign_in_failed']);
    expect(log.every((e) => e.clientAddress !== null)).toBe(true);
    expect(log.find((e) => e.action === 'session.signed_in')).toMatchObject({ sessionId: session, userAgent: 'test-browser/1' });
    expect(log.find((e) => e.action === 'token.created')).toMatchObject({ tokenId: token.id, sessionId: session });

    // Sign-out is logged too; a second sign-in reads it.
    expect((await request(h.app).delete(`${M}/session`).set(SAME_ORIGIN).set('Cookie', cookie)).status).toBe(204);
    const again = (await signIn(h, 'log@example.com')).cookie;
    expect((await logOf(again)).slice(0, 2).map((e) => [e.action, e.sessionId === session])).toEqual([
      ['session.signed_in', false],
      ['session.signed_out', true],
    ]);
    // Only the account's own: another account's log holds none of these.
    await newAccount(h, 'log-other@example.com');
    const other = (await signIn(h, 'log-other@example.com')).cookie;
    expect((await logOf(other)).map((e) => e.action)).toEqual(['session.signed_in']);
    expect(account.id).toMatch(/^usr_/);
  });

  test('an unknown email writes nothing and answers exactly as a wrong password', async () => {
    await newAccount(h, 'known@example.com');
    const before = Number((await h.runtime.db('security_log').count({ n: '*' }).first())!.n);
    const unknown = await signInWith('unknown-person@example.com', 'some guess or other');
    const afterUnknown = Number((await h.runtime.db('security_log').count({ n: '*' }).first())!.n);
    const wrong = await signInWith('known@example.com', 'some guess or other');
    expect(afterUnknown).toBe(before);
    expect(unknown.status).toBe(wrong.status);
    expect(unknown.body).toEqual(wrong.body);
    expect(unknown.headers['set-cookie']).toEqual(wrong.headers['set-cookie']);
  });

  test('sessions ended by the account, a password change, an owner and a role change', async () => {
    const owner = await newMember(h, h.site.id, 'log-owner@example.com', 'owner');
    const agent = await newMember(h, h.site.id, 'log-agent@example.com', 'agent');
    const ownerCookie = (await signIn(h, 'log-owner@example.com')).cookie;
    const a = await signIn(h, 'log-agent@example.com');
    const b = await signIn(h, 'log-agent@example.com');
    const bId = b.res.body.data.session.id;
    expect((await request(h.app).delete(`${M}/sessions/${bId}`).set(SAME_ORIGIN).set('Cookie', a.cookie)).status).toBe(204);
    await signIn(h, 'log-agent@example.com');
    expect((await post('/password', { currentPassword: PASSWORD, newPassword: 'a brand new long password' }, a.cookie)).status).toBe(204);
    await signIn(h, 'log-agent@example.com', 'a brand new long password');
    const ended = await request(h.app).delete(`${M}/sites/${h.site.id}/members/${agent.id}/sessions`).set(SAME_ORIGIN).set('Cookie', ownerCookie);
    expect(ended.status).toBe(200);
    // An owner's change tells the member's log what happened, never the owner's address.
    await newMember(h, h.site.id, 'log-second-owner@example.com', 'owner');
    expect(owner.id).toMatch(/^usr_/);
    const c = (await signIn(h, 'log-agent@example.com', 'a brand new long password')).cookie;
    const role = await request(h.app).patch(`${M}/sites/${h.site.id}/members/${agent.id}`).set(SAME_ORIGIN).set('Cookie', ownerCookie).send({ role: 'agent' });
    expect(role.status).toBe(200); // the same role: nothing ends
    const rows = (await h.runtime
      .db('security_log')
      .where({ account_id: agent.id })
      .orderBy([{ column: 'created_at' }, { column: 'id' }])) as {
      action: string;
      client_ip: string | null;
      session_id: string | null;
    }[];
    expect(rows.map((r) => r.action)).toEqual([
      'session.signed_in',
      'session.signed_in',
      'session.ended',
      'session.signed_in',
      'account.password_changed',
      'sessions.ended.password_change',
      'session.signed_in',
      'sessions.ended.owner',
      'session.signed_in',
    ]);
    expect(rows.find((r) => r.action === 'session.ended')!.session_id).toBe(bId);
    expect(rows.find((r) => r.action === 'sessions.ended.owner')!.client_ip).toBeNull();
    expect((await logOf(c))[0].action).toBe('session.signed_in');
  });

  test('keyset pages, newest first; maintenance purges entries after 90 days', async () => {
    await newAccount(h, 'pages@example.com');
    for (let i = 0; i < 5; i++) {
      clock += 1;
      await signIn(h, 'pages@example.com');
    }
    const cookie = (await signIn(h, 'pages@example.com')).cookie;
    const first = await request(h.app).get(`${M}/security-log?limit=4`).set('Cookie', cookie);
    expect(first.body.data).toHaveLength(4);
    expect(first.body.page.hasMore).toBe(true);
    const second = await request(h.app).get(`${M}/security-log?limit=4&cursor=${first.body.page.nextCursor}`).set('Cookie', cookie);
    expect(second.body.data).toHaveLength(2);
    const all = [...first.body.data, ...second.body.data];
    expect(new Set(all.map((e: { id: string }) => e.id)).size).toBe(6);
    expect(all.map((e: { createdAt: string }) => e.createdAt)).toEqual([...all.map((e: { createdAt: string }) => e.createdAt)].sort().reverse());
    // Another account's cursor is refused.
    await newAccount(h, 'pages-other@example.com');
    const other = (await signIn(h, 'pages-other@example.com')).cookie;
    expect((await request(h.app).get(`${M}/security-log?cursor=${first.body.page.nextCursor}`).set('Cookie', other)).status).toBe(400);

    const purged = await h.runtime.services.accounts.securityLog.purge(clock + SECURITY_LOG_RETENTION_MS + 1);
    expect(purged).toBeGreaterThanOrEqual(7);
    expect(Number((await h.runtime.db('security_log').count({ n: '*' }).first())!.n)).toBe(0);
  });
});

describe('lock-out by an attacker who knows the email', () => {
  test("the owner's browser with a device cookie still signs in; a client without one is locked out", async () => {
    await newAccount(h, 'victim@example.com');
    const device = cookiesOf(await signInWith('victim@example.com', PASSWORD))['__Host-device'];
    expect(device).toMatch(/^__Host-device=[0-9A-Za-z]+\.[0-9a-f]{64}$/);
    await lockOut('victim@example.com');
    const owner = await signInWith('victim@example.com', PASSWORD, device);
    expect(owner.status).toBe(200);
    // A failed attempt with the device cookie spends the device's budget, never the email's.
    expect((await signInWith('victim@example.com', 'typo in the password', device)).status).toBe(401);
    expect((await signInWith('victim@example.com', PASSWORD, device)).status).toBe(200);
  });

  test('the device cookie is set HttpOnly, Secure, SameSite=Strict, host-only, for a year', async () => {
    await newAccount(h, 'attrs@example.com');
    const res = await signInWith('attrs@example.com', PASSWORD);
    const set = (res.headers['set-cookie'] as unknown as string[]).find((c) => c.startsWith('__Host-device='))!;
    expect(set.split('; ').slice(1)).toEqual(expect.arrayContaining(['Path=/', 'HttpOnly', 'Secure', 'SameSite=Strict', `Max-Age=${365 * 24 * 3600}`]));
    expect(set).not.toMatch(/Domain=/i);
    expect(cookieOf(res)).toMatch(/^__Host-session=/); // the session cookie stays the first
  });

  test("a forged device cookie or another account's counts for nothing", async () => {
    await newAccount(h, 'target@example.com');
    await newAccount(h, 'attacker@example.com');
    const attackers = cookiesOf(await signInWith('attacker@example.com', PASSWORD))['__Host-device'];
    const [nonce] = attackers.slice('__Host-device='.length).split('.');
    await lockOut('target@example.com');
    expect((await signInWith('target@example.com', PASSWORD, attackers)).status).toBe(429);
    expect((await signInWith('target@example.com', PASSWORD, `__Host-device=${nonce}.${'0'.repeat(64)}`)).status).toBe(429);
    expect((await signInWith('target@example.com', PASSWORD, '__Host-device=garbage')).status).toBe(429);
  });

  test('a device cookie that fails too often counts as none', async () => {
    await newAccount(h, 'stolen-laptop@example.com');
    const device = cookiesOf(await signInWith('stolen-laptop@example.com', PASSWORD))['__Host-device'];
    for (let i = 0; i < SIGN_IN_LIMITS.perDevice.limit; i++) expect((await signInWith('stolen-laptop@example.com', 'guessing on', device)).status).toBe(401);
    // Its own budget spent, it falls back to the email's: ten more guesses, then the lock.
    for (let i = 0; i < SIGN_IN_LIMITS.perEmail.limit; i++) expect((await signInWith('stolen-laptop@example.com', 'guessing on', device)).status).toBe(401);
    expect((await signInWith('stolen-laptop@example.com', PASSWORD, device)).status).toBe(429);
  });

  test("a password change from an open session after the email's budget is spent", async () => {
    await newAccount(h, 'changer@example.com');
    const { cookie } = await signIn(h, 'changer@example.com');
    await lockOut('changer@example.com');
    const res = await post('/password', { currentPassword: PASSWORD, newPassword: 'another long password here' }, cookie);
    expect(res.status).toBe(204);
  });

  test('signed-in password proofs have their own per-account budget', async () => {
    await newAccount(h, 'slow-thief@example.com');
    const { cookie } = await signIn(h, 'slow-thief@example.com');
    for (let i = 0; i < SIGN_IN_LIMITS.perAccount.limit; i++) expect((await post('/session/sudo', { password: 'guess number n' }, cookie)).status).toBe(403);
    const limited = await post('/password', { currentPassword: PASSWORD, newPassword: 'another long password here' }, cookie);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // ...which the sign-in budget does not share.
    expect((await signInWith('slow-thief@example.com', PASSWORD)).status).toBe(200);
  });
});

type Operation = { method: string; path: string; operationId: string; sudo: true | 'session' | 'owner-role' };
const doc = YAML.parse(fs.readFileSync(path.resolve(__dirname, '../../openapi/manage.yaml'), 'utf8'));
const sudoOperations: Operation[] = Object.entries<Record<string, { operationId: string; 'x-sudo'?: Operation['sudo'] }>>(doc.paths).flatMap(([p, item]) =>
  Object.entries(item)
    .filter(([, op]) => op['x-sudo'] !== undefined)
    .map(([method, op]) => ({ method, path: p, operationId: op.operationId, sudo: op['x-sudo']! })),
);

describe('the sudo window', () => {
  let ownerCookie: string;
  let ownerToken: string;
  let siteId: string;

  /** A request each `x-sudo` operation takes as valid; a new operation marked in the document needs one here. */
  const bodies: Record<string, () => object | undefined> = {
    createToken: () => ({ label: 'sudo check' }),
    changePassword: () => ({ currentPassword: PASSWORD, newPassword: PASSWORD }),
    updateSite: () => ({ name: 'Renamed in sudo' }),
    rotateIdentitySecret: () => undefined,
    createKey: () => ({ label: 'sudo check', scopes: ['conversations:read'] }),
    setEventAddress: () => ({ url: 'https://127.0.0.1:9/in' }),
    rotateEventSecret: () => undefined,
    rollEventSecret: () => undefined,
    createInvitation: () => ({ email: 'new-owner@example.com', role: 'owner' }),
    changeMemberRole: () => ({ role: 'owner' }),
  };
  let agentId: string;
  const call = (op: Operation, auth: { cookie?: string; token?: string }) => {
    const url = `${M}${op.path.replace('{siteId}', siteId).replace('{accountId}', agentId)}`;
    let r = (request(h.app) as unknown as Record<string, (u: string) => request.Test>)[op.method](url);
    r = auth.token ? r.set('Authorization', `Bearer ${auth.token}`) : r.set(SAME_ORIGIN).set('Cookie', auth.cookie!);
    const body = bodies[op.operationId]();
    return body ? r.send(body) : r;
  };

  beforeAll(async () => {
    siteId = h.site.id;
    await newMember(h, siteId, 'sudo-owner@example.com', 'owner');
    ownerCookie = (await signIn(h, 'sudo-owner@example.com')).cookie;
    ownerToken = (await newToken(h, ownerCookie)).token;
    // An event address to rotate and roll (made inside the sign-in's window).
    expect(
      (
        await call(
          sudoOperations.find((o) => o.operationId === 'setEventAddress')!,
          { cookie: ownerCookie },
        )
      ).status,
    ).toBe(201);
  });

  test('the document marks what mints tokens, changes the password, makes owners, shows or rotates secrets', () => {
    expect(Object.fromEntries(sudoOperations.map((o) => [o.operationId, o.sudo]))).toEqual({
      createToken: 'session',
      changePassword: 'session',
      updateSite: true,
      rotateIdentitySecret: true,
      createKey: true,
      setEventAddress: true,
      rotateEventSecret: true,
      rollEventSecret: true,
      createInvitation: 'owner-role',
      changeMemberRole: 'owner-role',
    });
    for (const op of sudoOperations) expect(Object.keys(doc.paths[op.path][op.method].responses)).toContain('403');
  });

  test('every x-sudo operation refuses a session outside the window and passes inside it', async () => {
    for (const op of sudoOperations) {
      const agent = await newMember(h, siteId, `sudo-agent-${op.operationId}@example.com`, 'agent');
      agentId = agent.id;
      // Active (seen within 30 minutes), but its password was proved 11 minutes ago.
      clock += SUDO_WINDOW_MS + MIN;
      const outside = await call(op, { cookie: ownerCookie });
      expect([op.operationId, outside.status, outside.body.error?.code]).toEqual([op.operationId, 403, 'reauthentication_required']);
      expect((await post('/session/sudo', { password: PASSWORD }, ownerCookie)).status).toBe(200);
      const inside = await call(op, { cookie: ownerCookie });
      expect([op.operationId, inside.status < 300]).toEqual([op.operationId, true]);
      if (op.operationId === 'rollEventSecret')
        await request(h.app).delete(`${M}/sites/${siteId}/event-address/secret/roll`).set(SAME_ORIGIN).set('Cookie', ownerCookie);
      if (op.operationId === 'createInvitation' || op.operationId === 'changeMemberRole') {
        // The condition: an agent's invitation or a change to agent needs no window.
        clock += SUDO_WINDOW_MS + MIN;
        const plain =
          op.operationId === 'createInvitation'
            ? await post(`/sites/${siteId}/invitations`, { email: 'new-agent@example.com', role: 'agent' }, ownerCookie)
            : await request(h.app).patch(`${M}/sites/${siteId}/members/${agentId}`).set(SAME_ORIGIN).set('Cookie', ownerCookie).send({ role: 'agent' });
        expect(plain.status).toBeLessThan(300);
        expect((await post('/session/sudo', { password: PASSWORD }, ownerCookie)).status).toBe(200);
      }
    }
  });

  test('a management token passes x-sudo: true, and never mints a token nor changes the password', async () => {
    clock += SUDO_WINDOW_MS + MIN;
    for (const op of sudoOperations) {
      agentId = (await newMember(h, siteId, `token-agent-${op.operationId}@example.com`, 'agent')).id;
      const res = await call(op, { token: ownerToken });
      if (op.sudo === 'session') expect([op.operationId, res.status, res.body.error?.code]).toEqual([op.operationId, 403, 'forbidden']);
      else expect([op.operationId, res.status < 300]).toEqual([op.operationId, true]);
      if (op.operationId === 'rollEventSecret')
        await request(h.app).delete(`${M}/sites/${siteId}/event-address/secret/roll`).set('Authorization', `Bearer ${ownerToken}`);
    }
    const sudo = await request(h.app).post(`${M}/session/sudo`).set('Authorization', `Bearer ${ownerToken}`).send({ password: PASSWORD });
    expect([sudo.status, sudo.body.error.code]).toEqual([403, 'forbidden']);
  });

  test('a sign-in opens the window', async () => {
    const fresh = (await signIn(h, 'sudo-owner@example.com')).cookie;
    expect((await post('/tokens', { label: 'right after sign-in' }, fresh)).status).toBe(201);
    clock += SUDO_WINDOW_MS;
    expect((await post('/tokens', { label: 'ten minutes on' }, fresh)).body.error.code).toBe('reauthentication_required');
  });

  test('tokens made before the last password change are flagged, and the change can revoke every token', async () => {
    await newAccount(h, 'flagged@example.com');
    const { cookie } = await signIn(h, 'flagged@example.com');
    const old = await newToken(h, cookie, 'old');
    clock += 1;
    expect((await post('/password', { currentPassword: PASSWORD, newPassword: 'the second long password' }, cookie)).status).toBe(204);
    clock += 1;
    const made = await newToken(h, cookie, 'new');
    const list = async () => (await request(h.app).get(`${M}/tokens`).set('Cookie', cookie)).body.data as { id: string; madeBeforePasswordChange: boolean }[];
    expect(Object.fromEntries((await list()).map((t) => [t.id, t.madeBeforePasswordChange]))).toEqual({ [old.id]: true, [made.id]: false });
    const change = await post('/password', { currentPassword: 'the second long password', newPassword: 'the third long password', revokeTokens: true }, cookie);
    expect(change.status).toBe(204);
    for (const t of [old, made]) expect((await request(h.app).get(`${M}/me`).set('Authorization', `Bearer ${t.token}`)).status).toBe(401);
    expect((await list()).every((t) => !t.madeBeforePasswordChange)).toBe(true);
    expect(
      (await logOf(cookie))
        .filter((e) => e.action === 'token.revoked')
        .map((e) => e.tokenId)
        .sort(),
    ).toEqual([old.id, made.id].sort());
  });
});
