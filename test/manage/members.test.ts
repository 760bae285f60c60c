/**
 * Roles and isolation, members, management tokens, invitations and the audit log, through the
 * real app (response validation on).
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, newMember, newToken, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { sha256Hex } from '../../server/platform/crypto';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
let siteB: { id: string };
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
let outsider: { id: string; cookie: string };

const get = (path: string, cookie: string) => request(h.app).get(`${M}${path}`).set('Cookie', cookie);
const change = (method: 'post' | 'patch' | 'delete', path: string, cookie: string) =>
  request(h.app)[method](`${M}${path}`).set(SAME_ORIGIN).set('Cookie', cookie);
const auditActions = async (siteId: string) =>
  (await get(`/sites/${siteId}/audit-log?limit=100`, owner.cookie)).body.data.map((e: { action: string; objectId: string }) => `${e.action} ${e.objectId}`);

beforeAll(async () => {
  // Each reading of the clock moves it a millisecond, so entries written one after another sort in that order.
  h = await manageHarness({ now: () => (clock += 1) });
  siteB = await h.newSite('Other site');
  const o = await newMember(h, h.site.id, 'owner@example.com', 'owner');
  const a = await newMember(h, h.site.id, 'agent@example.com', 'agent');
  const x = await newMember(h, siteB.id, 'outsider@example.com', 'owner');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  outsider = { id: x.id, cookie: (await signIn(h, 'outsider@example.com')).cookie };
});
afterAll(() => h.close());

test('my sites and the members of a site; another site is 404, exactly like a missing one', async () => {
  expect((await get('/sites', agent.cookie)).body.data).toEqual([expect.objectContaining({ id: h.site.id, role: 'agent' })]);
  const members = await get(`/sites/${h.site.id}/members`, agent.cookie);
  expect(members.status).toBe(200);
  expect(members.body.data.map((m: { email: string; role: string }) => `${m.email}:${m.role}`)).toEqual(['owner@example.com:owner', 'agent@example.com:agent']);

  const foreign = await get(`/sites/${h.site.id}/members`, outsider.cookie);
  const missing = await get('/sites/ws_00000000000000000000000000/members', outsider.cookie);
  expect(foreign.status).toBe(404);
  expect(foreign.body).toEqual(missing.body);
  expect((await change('patch', `/sites/${h.site.id}/members/${agent.id}`, outsider.cookie).send({ role: 'owner' })).status).toBe(404);
  expect((await get(`/sites/${h.site.id}/audit-log`, outsider.cookie)).status).toBe(404);
});

test('an agent gets 403 forbidden on owner routes', async () => {
  const cases = [
    change('patch', `/sites/${h.site.id}/members/${owner.id}`, agent.cookie).send({ role: 'agent' }),
    change('delete', `/sites/${h.site.id}/members/${owner.id}`, agent.cookie),
    change('delete', `/sites/${h.site.id}/members/${owner.id}/sessions`, agent.cookie),
    change('post', `/sites/${h.site.id}/invitations`, agent.cookie).send({ email: 'new@example.com', role: 'owner' }),
    get(`/sites/${h.site.id}/audit-log`, agent.cookie),
  ];
  for (const res of await Promise.all(cases)) {
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
  }
  expect((await get('/me', owner.cookie)).status).toBe(200); // the owner's sessions are untouched
});

test("a role change ends that member's sessions; the new role holds at the next sign-in", async () => {
  await newMember(h, h.site.id, 'promoted@example.com', 'agent');
  const m = await signIn(h, 'promoted@example.com');
  const accountId = m.res.body.data.account.id;
  const res = await change('patch', `/sites/${h.site.id}/members/${accountId}`, owner.cookie).send({ role: 'owner' });
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ accountId, role: 'owner' });
  expect((await get('/me', m.cookie)).status).toBe(401);
  const again = await signIn(h, 'promoted@example.com');
  expect((await get(`/sites/${h.site.id}/audit-log`, again.cookie)).status).toBe(200);
  expect(await auditActions(h.site.id)).toContain(`member.role_changed.owner ${accountId}`);
});

test("removal ends the member's sessions and their access; the last owner stays", async () => {
  await newMember(h, h.site.id, 'leaving@example.com', 'agent');
  const m = await signIn(h, 'leaving@example.com');
  const accountId = m.res.body.data.account.id;
  const token = await newToken(h, m.cookie, 'before leaving');
  expect((await change('delete', `/sites/${h.site.id}/members/${accountId}`, owner.cookie)).status).toBe(204);
  expect((await get('/me', m.cookie)).status).toBe(401);
  const back = await signIn(h, 'leaving@example.com');
  expect((await get(`/sites/${h.site.id}/members`, back.cookie)).status).toBe(404);
  expect(await auditActions(h.site.id)).toContain(`member.removed ${accountId}`);

  // The log still names the former member by email, as actor and as object; other objects have no email.
  const log = (await get(`/sites/${h.site.id}/audit-log?limit=100`, owner.cookie)).body.data as {
    action: string;
    objectId: string;
    objectEmail: string | null;
    actor: { email: string | null };
  }[];
  expect(log.find((e) => e.action === 'token.created' && e.objectId === token.id)).toMatchObject({
    actor: { type: 'account', accountId, email: 'leaving@example.com' },
    objectEmail: null,
  });
  expect(log.find((e) => e.action === 'member.removed' && e.objectId === accountId)).toMatchObject({
    actor: { accountId: owner.id, email: 'owner@example.com' },
    objectEmail: 'leaving@example.com',
  });

  // Site B has one owner: they can neither leave nor be demoted.
  const last = await change('delete', `/sites/${siteB.id}/members/${outsider.id}`, outsider.cookie);
  expect(last.status).toBe(403);
  expect(last.body.error.message).toMatch(/at least one owner/);
  expect((await change('patch', `/sites/${siteB.id}/members/${outsider.id}`, outsider.cookie).send({ role: 'agent' })).status).toBe(403);
});

test('an owner signs a member out everywhere', async () => {
  await newMember(h, h.site.id, 'busy@example.com', 'agent');
  const one = await signIn(h, 'busy@example.com');
  const two = await signIn(h, 'busy@example.com');
  const accountId = one.res.body.data.account.id;
  const res = await change('delete', `/sites/${h.site.id}/members/${accountId}/sessions`, owner.cookie);
  expect(res.status).toBe(200);
  expect(res.body.data).toEqual({ ended: 2 });
  expect((await get('/me', one.cookie)).status).toBe(401);
  expect((await get('/me', two.cookie)).status).toBe(401);
  expect(await auditActions(h.site.id)).toContain(`member.sessions_ended ${accountId}`);
});

test('a management token is shown once, stored as a hash, acts as the account, and stops at revocation', async () => {
  const created = await newToken(h, owner.cookie, 'deploy script');
  expect(created.token).toMatch(/^wcm_[0-9A-Za-z]{43,}$/);
  const rows = await h.runtime.db('management_tokens').where({ id: created.id });
  expect(rows).toHaveLength(1);
  expect(JSON.stringify(rows)).not.toContain(created.token);
  expect(rows[0].fingerprint).toBe(sha256Hex(created.token));

  const listed = await get('/tokens', owner.cookie);
  expect(JSON.stringify(listed.body)).not.toContain(created.token);
  expect(listed.body.data.find((t: { id: string }) => t.id === created.id)).toMatchObject({
    label: 'deploy script',
    prefix: created.token.slice(0, 12),
    revokedAt: null,
  });

  const bearer = { Authorization: `Bearer ${created.token}` };
  const who = await request(h.app).get(`${M}/me`).set(bearer);
  expect(who.body.data).toMatchObject({ via: 'token', account: { id: owner.id } });
  expect((await request(h.app).get(`${M}/sites/${h.site.id}/audit-log`).set(bearer)).status).toBe(200);
  expect((await request(h.app).get(`${M}/sites/${siteB.id}/members`).set(bearer)).status).toBe(404);

  // Another account cannot see or revoke it.
  expect((await change('delete', `/tokens/${created.id}`, agent.cookie)).status).toBe(404);
  expect((await change('delete', `/tokens/${created.id}`, owner.cookie)).status).toBe(204);
  expect((await request(h.app).get(`${M}/me`).set(bearer)).status).toBe(401);
  const actions = await auditActions(h.site.id);
  expect(actions).toContain(`token.created ${created.id}`);
  expect(actions).toContain(`token.revoked ${created.id}`);
});

test('an invitation: shown once, hash stored, single use, for its email only', async () => {
  const res = await change('post', `/sites/${h.site.id}/invitations`, owner.cookie).send({ email: 'Newbie@Example.com', role: 'agent' });
  expect(res.status).toBe(201);
  const inv = res.body.data;
  expect(inv).toMatchObject({ siteId: h.site.id, email: 'newbie@example.com', role: 'agent' });
  expect(inv.url).toBe(`https://localhost:8443/dashboard/accept-invitation#token=${inv.token}`);
  const invited = await h.runtime.db('invitations').where({ id: inv.id }).first('created_at');
  expect(Date.parse(inv.expiresAt) - Number(invited.created_at)).toBe(7 * 24 * 3600_000);
  const rows = await h.runtime.db('invitations').where({ id: inv.id });
  expect(JSON.stringify(rows)).not.toContain(inv.token);
  expect(rows[0].token_hash).toBe(sha256Hex(inv.token));

  const accept = (body: object) => request(h.app).post(`${M}/invitations/accept`).set(SAME_ORIGIN).send(body);
  const otherEmail = await accept({ token: inv.token, email: 'someone@example.com', password: PASSWORD });
  expect(otherEmail.status).toBe(400);
  const weak = await accept({ token: inv.token, email: 'newbie@example.com', password: 'short' });
  expect(weak.status).toBe(400);
  // Refusals take nothing: no account was made, and the invitation is still there to accept.
  expect(await h.runtime.db('accounts').whereIn('email', ['someone@example.com', 'newbie@example.com'])).toHaveLength(0);
  const joined = await accept({ token: inv.token, email: 'newbie@example.com', password: PASSWORD });
  expect(joined.status).toBe(200);
  expect(joined.body.data).toMatchObject({ account: { email: 'newbie@example.com' }, site: { id: h.site.id, role: 'agent' }, session: { current: true } });
  const cookie = (joined.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
  expect((await get('/sites', cookie)).body.data).toEqual([expect.objectContaining({ id: h.site.id, role: 'agent' })]);

  const again = await accept({ token: inv.token, email: 'newbie@example.com', password: PASSWORD });
  expect(again.status).toBe(404);
  const actions = await auditActions(h.site.id);
  expect(actions).toContain(`invitation.created.agent ${inv.id}`);
  expect(actions).toContain(`invitation.accepted.agent ${inv.id}`);
});

test('owners list pending invitations without their links, page by page, and withdraw one', async () => {
  const made: { id: string; email: string; token: string; expiresAt: string }[] = [];
  for (const email of ['pending-1@example.com', 'pending-2@example.com', 'pending-3@example.com']) {
    made.push((await change('post', `/sites/${h.site.id}/invitations`, owner.cookie).send({ email, role: 'agent' })).body.data);
  }
  const taken = (await change('post', `/sites/${h.site.id}/invitations`, owner.cookie).send({ email: 'taker@example.com', role: 'agent' })).body.data;
  const took = await request(h.app)
    .post(`${M}/invitations/accept`)
    .set(SAME_ORIGIN)
    .send({ token: taken.token, email: 'taker@example.com', password: PASSWORD });
  expect(took.status).toBe(200);
  expect((await change('post', `/sites/${siteB.id}/invitations`, outsider.cookie).send({ email: 'other-site@example.com', role: 'agent' })).status).toBe(201);

  const seen: { id: string; email: string }[] = [];
  let cursor: string | null = null;
  do {
    const page: request.Response = await get(`/sites/${h.site.id}/invitations?limit=2${cursor ? `&cursor=${cursor}` : ''}`, owner.cookie);
    expect(page.status).toBe(200);
    expect(JSON.stringify(page.body)).not.toMatch(/token|url/);
    seen.push(...page.body.data);
    cursor = page.body.page.nextCursor;
  } while (cursor);
  const emails = seen.map((i) => i.email);
  // Pending ones of this site only, newest first; the taken one and the other site's are not there.
  for (const inv of made) expect(emails).toContain(inv.email);
  expect(emails).not.toContain('taker@example.com');
  expect(emails).not.toContain('other-site@example.com');
  expect(new Set(seen.map((i) => i.id)).size).toBe(seen.length);
  expect(emails.indexOf('pending-3@example.com')).toBeLessThan(emails.indexOf('pending-1@example.com'));
  expect(seen.find((i) => i.id === made[0].id)).toMatchObject({ siteId: h.site.id, role: 'agent', createdBy: owner.id, expiresAt: made[0].expiresAt });

  // An agent may neither list nor withdraw; withdrawing the taken one, or one of another site, is 404.
  expect((await get(`/sites/${h.site.id}/invitations`, agent.cookie)).status).toBe(403);
  expect((await change('delete', `/sites/${h.site.id}/invitations/${made[1].id}`, agent.cookie)).status).toBe(403);
  expect((await change('delete', `/sites/${h.site.id}/invitations/${taken.id}`, owner.cookie)).status).toBe(404);
  expect((await change('delete', `/sites/${siteB.id}/invitations/${made[1].id}`, outsider.cookie)).status).toBe(404);

  expect((await change('delete', `/sites/${h.site.id}/invitations/${made[1].id}`, owner.cookie)).status).toBe(204);
  expect((await change('delete', `/sites/${h.site.id}/invitations/${made[1].id}`, owner.cookie)).status).toBe(404);
  const dead = await request(h.app).post(`${M}/invitations/accept`).set(SAME_ORIGIN).send({ token: made[1].token, email: made[1].email, password: PASSWORD });
  expect(dead.status).toBe(404);
  expect((await get(`/sites/${h.site.id}/invitations?limit=100`, owner.cookie)).body.data.map((i: { id: string }) => i.id)).not.toContain(made[1].id);
  expect(await auditActions(h.site.id)).toContain(`invitation.revoked ${made[1].id}`);
});

test('a signed-in account accepts as itself; an invitation expires after 7 days', async () => {
  const existing = await newMember(h, siteB.id, 'joiner@example.com', 'agent');
  const joiner = await signIn(h, 'joiner@example.com');
  const inv = (await change('post', `/sites/${h.site.id}/invitations`, owner.cookie).send({ email: 'joiner@example.com', role: 'owner' })).body.data;
  const late = (await change('post', `/sites/${h.site.id}/invitations`, owner.cookie).send({ email: 'late@example.com', role: 'agent' })).body.data;

  const res = await request(h.app).post(`${M}/invitations/accept`).set(SAME_ORIGIN).set('Cookie', joiner.cookie).send({ token: inv.token });
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ account: { id: existing.id }, site: { id: h.site.id, role: 'owner' }, session: null });
  expect(res.headers['set-cookie']).toBeUndefined();

  clock += 7 * 24 * 3600_000;
  const expired = await request(h.app)
    .post(`${M}/invitations/accept`)
    .set(SAME_ORIGIN)
    .send({ token: late.token, email: 'late@example.com', password: PASSWORD });
  expect(expired.status).toBe(404);
  expect(await h.runtime.db('accounts').where({ email: 'late@example.com' })).toHaveLength(0);
  // The clock moved a week: sign the fixtures in again for the tests after this one.
  owner.cookie = (await signIn(h, 'owner@example.com')).cookie;
});

test('the audit log pages newest first with a cursor bound to its site', async () => {
  const first = await get(`/sites/${h.site.id}/audit-log?limit=2`, owner.cookie);
  expect(first.status).toBe(200);
  expect(first.body.data).toHaveLength(2);
  expect(first.body.page.hasMore).toBe(true);
  const all = (await get(`/sites/${h.site.id}/audit-log?limit=100`, owner.cookie)).body.data;
  const second = await get(`/sites/${h.site.id}/audit-log?limit=2&cursor=${first.body.page.nextCursor}`, owner.cookie);
  expect([...first.body.data, ...second.body.data].map((e: { id: string }) => e.id)).toEqual(all.slice(0, 4).map((e: { id: string }) => e.id));
  const times = all.map((e: { createdAt: string }) => e.createdAt);
  expect([...times].sort().reverse()).toEqual(times);
  expect(all[all.length - 1].actor).toEqual({ type: 'operator', accountId: null, email: null, tokenId: null }); // the CLI's member add
  expect(all.find((e: { action: string }) => e.action === 'member.removed')).toMatchObject({
    actor: { type: 'account', accountId: owner.id },
    clientAddress: expect.stringMatching(/127\.0\.0\.1/),
  });

  // A cursor of site A used on site B is refused.
  await newMember(h, siteB.id, 'both@example.com', 'owner');
  await h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, h.site.id, 'both@example.com', 'owner');
  const both = await signIn(h, 'both@example.com');
  const wrongSite = await get(`/sites/${siteB.id}/audit-log?cursor=${first.body.page.nextCursor}`, both.cookie);
  expect(wrongSite.status).toBe(400);
});

test('maintenance removes ended sessions, dead invitations and audit entries older than a year', async () => {
  const before = await h.runtime.db('audit_log').count({ n: '*' }).first();
  expect(Number(before!.n)).toBeGreaterThan(0);
  const { signIn, invitations, audit } = h.runtime.services.accounts;
  const at = clock + 366 * 24 * 3600_000;
  const purged = { sessions: await signIn.purge(at), invitations: await invitations.purge(at), audit: await audit.purge(at) };
  expect(purged.audit).toBe(Number(before!.n));
  expect(purged.sessions).toBeGreaterThan(0);
  expect(purged.invitations).toBeGreaterThan(0);
  expect(Number((await h.runtime.db('sessions').count({ n: '*' }).first())!.n)).toBe(0);
});

test('the audit log names a revoked visitor by the id the page gave, and still answers within its document', async () => {
  // Visitor ids are the site's own text, not service ids: the fuzz found the log answering 500 (its
  // answer failed the document) once one was in it.
  const visitorId = 'crm:Customer#42/shop';
  // An owner of its own: the earlier tests end the first owner's sessions.
  await newMember(h, h.site.id, 'auditor@example.com', 'owner');
  const { cookie } = await signIn(h, 'auditor@example.com');
  expect((await change('post', `/sites/${h.site.id}/visitor-revocations`, cookie).send({ visitorId })).status).toBe(200);
  const log = await get(`/sites/${h.site.id}/audit-log?limit=5`, cookie);
  expect(log.status).toBe(200);
  expect(log.body.data.map((e: { action: string; objectId: string }) => `${e.action} ${e.objectId}`)).toContain(`visitor.revoked ${visitorId}`);

  // A visitor id the page made look like an account's id names no account's email.
  const auditor = (await get('/me', cookie)).body.data.account.id as string;
  expect((await change('post', `/sites/${h.site.id}/visitor-revocations`, cookie).send({ visitorId: auditor })).status).toBe(200);
  const posing = (await get(`/sites/${h.site.id}/audit-log?limit=5`, cookie)).body.data.find(
    (e: { action: string; objectId: string }) => e.action === 'visitor.revoked' && e.objectId === auditor,
  );
  expect(posing).toMatchObject({ objectId: auditor, objectEmail: null, actor: { email: 'auditor@example.com' } });
});
