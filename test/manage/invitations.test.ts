/**
 * Invitations under attack (issue 24), through the real app (response validation on) and the
 * service: an invitation does not tell which emails have accounts (one answer, one hash, and a
 * timing ratio), it answers a bounded number of password checks even sent at once, invitations are
 * a daily budget shared by every instance, accounts made through one are unverified, and an owner
 * invitation's promotion is a role change. Also: `token.revoked` and `member.sessions_ended` are
 * written in their change's transaction.
 */
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { testApp } from '../helpers/test-app';
import { cookieOf, M, manageHarness, newMember, newToken, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { createPasswordHasher, PasswordHasher } from '../../server/accounts/passwords';
import { INVITATION_LIMITS } from '../../server/accounts/invitations';
import { createAccountStore } from '../../server/accounts/store';
import { createTokens } from '../../server/accounts/tokens';
import { createMembers } from '../../server/accounts/members';
import type { AuditLog } from '../../server/accounts/audit';
import { createRedisLimiter, RateLimiter } from '../../server/http/rate-limit/limiter';
import type { SignedActor } from '../../server/accounts/common';
import { ApiError } from '../../server/platform/errors';

/** A cost where one hash (tens of ms) outweighs the database work around it, so timing shows hashes. */
const base = createPasswordHasher({ N: 2 ** 14, r: 8, p: 1 });
const hashes = { count: 0 };
const counting: PasswordHasher = {
  params: base.params,
  hash: (p) => (hashes.count++, base.hash(p)),
  verify: (p, s) => (hashes.count++, base.verify(p, s)),
  verifyNothing: (p) => (hashes.count++, base.verifyNothing(p)),
};

let h: Harness;
let owner: { id: string; cookie: string; token: string };
const MAX = INVITATION_LIMITS.attemptsPerInvitation;

beforeAll(async () => {
  h = await manageHarness({ passwordHasher: counting });
  const o = await newMember(h, h.site.id, 'owner@example.com', 'owner');
  const cookie = (await signIn(h, 'owner@example.com')).cookie;
  owner = { id: o.id, cookie, token: (await newToken(h, cookie)).token };
}, 60_000);
afterAll(() => h.close());

const services = () => h.runtime.services.accounts;
// A session inside its sudo window, as one just signed in is: owner invitations need one.
const ownerActor = (): SignedActor => ({
  manager: { accountId: owner.id, email: 'owner@example.com', via: 'session', sudoUntil: Date.now() + 60_000 },
  clientIp: null,
});
/** An invitation made through the service (no daily budget: that is the route's). */
const invite = (email: string, role: 'owner' | 'agent' = 'agent', siteId = h.site.id) => services().invitations.create(ownerActor(), siteId, email, role);
const accept = (body: object, cookie?: string) => {
  const r = request(h.app).post(`${M}/invitations/accept`).set(SAME_ORIGIN);
  return (cookie ? r.set('Cookie', cookie) : r).send(body);
};
const auditActions = async (siteId = h.site.id) =>
  (await request(h.app).get(`${M}/sites/${siteId}/audit-log?limit=100`).set('Authorization', `Bearer ${owner.token}`)).body.data.map(
    (e: { action: string; objectId: string }) => `${e.action} ${e.objectId}`,
  );
const attemptsOf = async (id: string) => Number((await h.runtime.db('invitations').where({ id }).first('attempts')).attempts);

/** The service's answer to an acceptance with a password: its status, and how long it took. */
async function timedAccept(token: string, email: string, password: string) {
  const started = performance.now();
  let status = 200;
  try {
    await services().invitations.accept(token, { email, password }, {});
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    status = err.status;
  }
  return { status, ms: performance.now() - started };
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ratio = (a: number, b: number) => Math.max(a, b) / Math.min(a, b);

test('a short password is the same 400 whether the email has an account, costs no hash, and takes as long', async () => {
  await newMember(h, h.site.id, 'known@example.com', 'agent');
  const known = await invite('known@example.com', 'owner');
  const free = await invite('free@example.com');

  const a = await accept({ token: known.token, email: 'known@example.com', password: 'short' });
  const b = await accept({ token: free.token, email: 'free@example.com', password: 'short' });
  expect([a.status, b.status]).toEqual([400, 400]);
  expect(a.body).toEqual(b.body);

  // Interleaved, so a busy moment of the machine weighs on both kinds alike.
  const times = { known: [] as number[], free: [] as number[] };
  hashes.count = 0;
  for (let i = 0; i < 21; i++) {
    const k = await timedAccept(known.token, 'known@example.com', 'short');
    const f = await timedAccept(free.token, 'free@example.com', 'short');
    expect([k.status, f.status]).toEqual([400, 400]);
    times.known.push(k.ms);
    times.free.push(f.ms);
  }
  expect(hashes.count).toBe(0);
  // Before: the known email spent a hash (tens of ms) where the free one answered at once.
  expect(ratio(median(times.known), median(times.free))).toBeLessThan(3);
  // The rules' refusals take none of the invitation's attempts: a person may retry a short password.
  expect(await attemptsOf(known.id)).toBe(0);
  expect(await h.runtime.db('accounts').where({ email: 'free@example.com' })).toHaveLength(0);
}, 120_000);

test("a wrong password is sign-in's 401; a wrong password and a new account each cost one hash and take as long", async () => {
  const wrong = await accept({ token: (await invite('known@example.com')).token, email: 'known@example.com', password: 'not the password at all' });
  const signInWrong = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'known@example.com', password: 'not the password at all' });
  expect(wrong.status).toBe(401);
  expect(wrong.body).toEqual(signInWrong.body);

  const times = { wrong: [] as number[], created: [] as number[] };
  const hashesOf = { wrong: [] as number[], created: [] as number[] };
  let known = await invite('known@example.com');
  for (let i = 0; i < 9; i++) {
    if (i % (MAX - 1) === 0) known = await invite('known@example.com'); // never its last attempt, which writes the audit entry
    const email = `timed-${i}@example.com`;
    const fresh = await invite(email);
    let before = hashes.count;
    const w = await timedAccept(known.token, 'known@example.com', 'not the password at all');
    hashesOf.wrong.push(hashes.count - before);
    before = hashes.count;
    const c = await timedAccept(fresh.token, email, PASSWORD);
    hashesOf.created.push(hashes.count - before);
    expect([w.status, c.status]).toEqual([401, 200]);
    times.wrong.push(w.ms);
    times.created.push(c.ms);
  }
  expect(hashesOf).toEqual({ wrong: Array(9).fill(1), created: Array(9).fill(1) });
  expect(ratio(median(times.wrong), median(times.created))).toBeLessThan(2);
}, 120_000);

test(`an invitation answers ${MAX} password checks, then is dead (404 like a used one) and audited`, async () => {
  const person = await newMember(h, h.site.id, 'target@example.com', 'agent');
  const inv = await invite('target@example.com', 'owner');
  const statuses: number[] = [];
  for (let i = 0; i <= MAX; i++) statuses.push((await accept({ token: inv.token, email: 'target@example.com', password: `guess number ${i} of many` })).status);
  expect(statuses).toEqual([...Array(MAX).fill(401), 404]);
  // Dead even for the right password, and for the invited account signed in.
  expect((await accept({ token: inv.token, email: 'target@example.com', password: PASSWORD })).status).toBe(404);
  const dead = await accept({ token: inv.token }, (await signIn(h, 'target@example.com')).cookie);
  expect(dead.status).toBe(404);
  expect(dead.body.error.message).toBe('This invitation does not exist, was used or has expired.');
  expect((await h.runtime.db('memberships').where({ account_id: person.id, site_id: h.site.id }).first()).role).toBe('agent');
  expect(await attemptsOf(inv.id)).toBe(MAX);
  const pending = await request(h.app).get(`${M}/sites/${h.site.id}/invitations?limit=100`).set('Authorization', `Bearer ${owner.token}`);
  expect(pending.body.data.map((i: { id: string }) => i.id)).not.toContain(inv.id);
  expect((await auditActions()).filter((a: string) => a === `invitation.exhausted ${inv.id}`)).toHaveLength(1);
}, 120_000);

test(`password checks sent at once still stop at ${MAX}`, async () => {
  await newMember(h, h.site.id, 'raced@example.com', 'agent');
  const inv = await invite('raced@example.com');
  const before = hashes.count;
  const all = await Promise.all(
    Array.from({ length: MAX + 3 }, (_, i) => accept({ token: inv.token, email: 'raced@example.com', password: `parallel guess ${i} here` })),
  );
  const statuses = all.map((r) => r.status).sort();
  expect(statuses).toEqual([...Array(MAX).fill(401), ...Array(3).fill(404)]);
  expect(hashes.count - before).toBe(MAX);
  expect(await attemptsOf(inv.id)).toBe(MAX);
  expect((await auditActions()).filter((a: string) => a === `invitation.exhausted ${inv.id}`)).toHaveLength(1);
}, 120_000);

test('an account made through an invitation is unverified and cannot be found by its email; the answer to an invitation tells nothing of accounts', async () => {
  const forKnown = await request(h.app)
    .post(`${M}/sites/${h.site.id}/invitations`)
    .set('Authorization', `Bearer ${owner.token}`)
    .send({ email: 'owner@example.com', role: 'agent' });
  const forFree = await request(h.app)
    .post(`${M}/sites/${h.site.id}/invitations`)
    .set('Authorization', `Bearer ${owner.token}`)
    .send({ email: 'squatter@example.com', role: 'agent' });
  expect([forKnown.status, forFree.status]).toEqual([201, 201]);
  expect(Object.keys(forKnown.body.data).sort()).toEqual(Object.keys(forFree.body.data).sort());

  const joined = await accept({ token: forFree.body.data.token, email: 'squatter@example.com', password: PASSWORD });
  expect(joined.status).toBe(200);
  expect((await h.runtime.db('accounts').where({ email: 'squatter@example.com' }).first('email_verified_at')).email_verified_at).toBeNull();
  const members = (await request(h.app).get(`${M}/sites/${h.site.id}/members`).set('Authorization', `Bearer ${owner.token}`)).body.data;
  const verified = Object.fromEntries(members.map((m: { email: string; emailVerified: boolean }) => [m.email, m.emailVerified]));
  expect(verified).toMatchObject({ 'owner@example.com': true, 'squatter@example.com': false });
  // Not found by its email until its link is used: the operator's `member add` answers as for no account.
  const other = await h.newSite('Elsewhere');
  const asUnknown = async (email: string) =>
    services()
      .members.add({ manager: null, clientIp: null }, other.id, email, 'agent')
      .then(
        () => 'added',
        (err: ApiError) => `${err.code} ${err.message}`,
      );
  expect(await asUnknown('squatter@example.com')).toBe(await asUnknown('never-made@example.com'));

  // Another site's invitation does not attach it either, even with its own password: the answer is
  // that of a wrong password, so nothing tells an unverified account from a wrong guess.
  const third = await h.newSite('Third');
  const thirdOwner = await newMember(h, third.id, 'third-owner@example.com', 'owner');
  const byThird: SignedActor = { manager: { accountId: thirdOwner.id, email: thirdOwner.email, via: 'session' }, clientIp: null };
  const again = await services().invitations.create(byThird, third.id, 'squatter@example.com', 'agent');
  const own = await accept({ token: again.token, email: 'squatter@example.com', password: PASSWORD });
  const wrong = await accept({ token: again.token, email: 'squatter@example.com', password: 'not the password at all' });
  expect([own.status, wrong.status]).toEqual([401, 401]);
  expect([own.body.error.code, own.body.error.message]).toEqual([wrong.body.error.code, wrong.body.error.message]);
  // Signed in as itself, it is told to verify first.
  const squatter = await signIn(h, 'squatter@example.com');
  const signed = await accept({ token: again.token }, squatter.cookie);
  expect(signed.status).toBe(403);
  expect(signed.body.error.message).toMatch(/Verify your email first/);
  expect(await h.runtime.db('memberships').where({ site_id: third.id })).toHaveLength(1);
}, 60_000);

test("an owner invitation accepted by an agent is a role change: audited as one, and the account's sessions end", async () => {
  const agent = await newMember(h, h.site.id, 'promoted@example.com', 'agent');
  const first = (await signIn(h, 'promoted@example.com')).cookie;
  const second = (await signIn(h, 'promoted@example.com')).cookie;
  const inv = await invite('promoted@example.com', 'owner');
  const res = await accept({ token: inv.token }, first);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ site: { id: h.site.id, role: 'owner' }, session: { current: true } });
  const fresh = cookieOf(res);
  for (const old of [first, second]) expect((await request(h.app).get(`${M}/me`).set('Cookie', old)).status).toBe(401);
  const me = await request(h.app).get(`${M}/me`).set('Cookie', fresh);
  expect(me.status).toBe(200);
  expect(me.body.data.sites).toContainEqual(expect.objectContaining({ id: h.site.id, role: 'owner' }));
  const actions = await auditActions();
  expect(actions).toContain(`member.role_changed.owner ${agent.id}`);
  expect(actions).toContain(`invitation.accepted.owner ${inv.id}`);

  // The same with the password instead of a session: the session elsewhere ends, the new one holds.
  const other = await newMember(h, h.site.id, 'promoted-2@example.com', 'agent');
  const elsewhere = (await signIn(h, 'promoted-2@example.com')).cookie;
  const inv2 = await invite('promoted-2@example.com', 'owner');
  const res2 = await accept({ token: inv2.token, email: 'promoted-2@example.com', password: PASSWORD });
  expect(res2.status).toBe(200);
  expect((await request(h.app).get(`${M}/me`).set('Cookie', elsewhere)).status).toBe(401);
  expect((await request(h.app).get(`${M}/me`).set('Cookie', cookieOf(res2))).status).toBe(200);
  expect(await auditActions()).toContain(`member.role_changed.owner ${other.id}`);
}, 60_000);

describe('the daily budget of invitations', () => {
  let redis: Redis;
  let limiters: RateLimiter[];
  beforeAll(() => {
    redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: false, maxRetriesPerRequest: 1 });
    // Two instances with their own limiters on one Redis: what each counts, the other sees.
    const prefix = `test:invitations:${randomUUID()}:`;
    limiters = [createRedisLimiter(redis.duplicate(), 300, prefix), createRedisLimiter(redis.duplicate(), 300, prefix)];
  });
  afterAll(async () => {
    for (const l of limiters) await l.close?.();
    redis.disconnect();
  });

  test('per site and per inviting account, counted by every instance; 429 with Retry-After; a refused role spends nothing', async () => {
    const { perSitePerDay, perAccountPerDay } = INVITATION_LIMITS;
    const apps = limiters.map((l) => testApp(h.runtime.services, l));
    const siteA = await h.newSite('Budget A');
    const siteB = await h.newSite('Budget B');
    const boss = await newMember(h, siteA.id, `boss-${randomUUID()}@example.com`, 'owner');
    await services().members.add({ manager: null, clientIp: null }, siteB.id, boss.email, 'owner');
    const bossToken = (await newToken(h, (await signIn(h, boss.email)).cookie)).token;
    const helper = await newMember(h, siteB.id, `helper-${randomUUID()}@example.com`, 'owner');
    const helperToken = (await newToken(h, (await signIn(h, helper.email)).cookie)).token;
    const lurker = await newMember(h, siteA.id, `lurker-${randomUUID()}@example.com`, 'agent');
    const lurkerToken = (await newToken(h, (await signIn(h, lurker.email)).cookie)).token;
    let n = 0;
    const create = (token: string, siteId: string) =>
      request(apps[n++ % 2])
        .post(`${M}/sites/${siteId}/invitations`)
        .set('Authorization', `Bearer ${token}`)
        .send({ email: `budget-${n}@example.com`, role: 'agent' });

    // An agent's refused attempts spend nothing of the site's budget.
    for (let i = 0; i < 5; i++) expect((await create(lurkerToken, siteA.id)).status).toBe(403);
    const onA = perSitePerDay - 10;
    for (let i = 0; i < onA; i++) expect((await create(bossToken, siteA.id)).status).toBe(201);
    for (let i = 0; i < perAccountPerDay - onA; i++) expect((await create(bossToken, siteB.id)).status).toBe(201);
    // The account's budget is spent, on both instances; site B has room for another owner.
    for (let i = 0; i < 2; i++) {
      const refused = await create(bossToken, siteB.id);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ code: 'rate_limit_exceeded', message: expect.stringContaining('per account') });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect((await create(helperToken, siteB.id)).status).toBe(201);
    // Site A still had 10 left, but its owner's are spent: that is the bound on one account's sites.
    expect((await create(bossToken, siteA.id)).status).toBe(429);
  }, 120_000);
});

test('token.revoked and member.sessions_ended are written in the transaction of their change', async () => {
  const store = createAccountStore(h.runtime.db);
  const failing = {
    ...services().audit,
    record: async () => {
      throw new Error('the audit write failed');
    },
  } as AuditLog;
  const token = await newToken(h, owner.cookie, 'to revoke');
  const tokens = createTokens({ store, audit: failing, securityLog: services().securityLog, now: Date.now });
  await expect(tokens.revoke(ownerActor(), token.id)).rejects.toThrow('the audit write failed');
  expect((await h.runtime.db('management_tokens').where({ id: token.id }).first('revoked_at')).revoked_at).toBeNull();

  const member = await newMember(h, h.site.id, 'signed-out@example.com', 'agent');
  await signIn(h, 'signed-out@example.com');
  const members = createMembers({ store, sites: { findSite: async () => undefined }, audit: failing, securityLog: services().securityLog, now: Date.now });
  await expect(members.endSessions(ownerActor(), h.site.id, member.id)).rejects.toThrow('the audit write failed');
  expect(await h.runtime.db('sessions').where({ account_id: member.id })).toHaveLength(1);
}, 60_000);
