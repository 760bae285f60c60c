/**
 * The caller's role on the site a /manage/v1 path names is read in the credential's own statement
 * (server/manage/entry.ts, server/accounts/store.ts) and judged by the role step as before: a role
 * changed or taken away holds on the very next request, for a session and for a management token,
 * and a path naming another site still reads that site's membership, not the credential's.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, memberWithToken, signIn } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await manageHarness();
});
afterAll(() => h.close());

/** The same request with the account's session cookie and with its management token. */
async function bothWays(email: string, role: 'owner' | 'agent') {
  const member = await memberWithToken(h, h.site.id, email, role);
  const cookie = (await signIn(h, email)).cookie;
  return {
    id: member.id,
    /** Made only when sent: supertest listens from the moment a request is made. */
    get: (path: string) => [
      () => request(h.app).get(`${M}${path}`).set('Cookie', cookie),
      () => request(h.app).get(`${M}${path}`).set('Authorization', `Bearer ${member.token}`),
    ],
  };
}
const statuses = async (requests: (() => request.Test)[]) => Promise.all(requests.map(async (r) => (await r()).status));
const membership = (accountId: string) => h.runtime.db('memberships').where({ account_id: accountId, site_id: h.site.id });

test('an inbox page reads the credential and the membership in one statement, with a session and with a token', async () => {
  const owner = await bothWays('counted@example.com', 'owner');
  const inbox = `/sites/${h.site.id}/inbox/conversations?limit=25`;
  for (const r of owner.get(inbox)) await r(); // sessions and tokens seen a moment ago are not touched again
  for (const make of [0, 1]) {
    const sql: string[] = [];
    const listener = (q: { sql: string }) => sql.push(q.sql);
    h.runtime.db.on('query', listener);
    try {
      expect((await owner.get(inbox)[make]()).status).toBe(200);
    } finally {
      h.runtime.db.off('query', listener);
    }
    expect(sql.filter((s) => /[`"]memberships[`"]/.test(s))).toHaveLength(1);
    expect(sql[0]).toMatch(/left join [`"]memberships[`"]/);
  }
});

test('an owner made an agent is refused an owner operation on the very next request', async () => {
  const member = await bothWays('demoted@example.com', 'owner');
  const ownersOnly = `/sites/${h.site.id}/allowed-origins`;
  expect(await statuses(member.get(ownersOnly))).toEqual([200, 200]);
  await membership(member.id).update({ role: 'agent' });
  expect(await statuses(member.get(ownersOnly))).toEqual([403, 403]);
  expect(await statuses(member.get(`/sites/${h.site.id}/inbox/conversations`))).toEqual([200, 200]);
  await membership(member.id).update({ role: 'owner' });
  expect(await statuses(member.get(ownersOnly))).toEqual([200, 200]);
});

test('a member removed from the site gets 404 on the very next request', async () => {
  const member = await bothWays('removed@example.com', 'agent');
  const inbox = `/sites/${h.site.id}/inbox/conversations`;
  expect(await statuses(member.get(inbox))).toEqual([200, 200]);
  await membership(member.id).delete();
  expect(await statuses(member.get(inbox))).toEqual([404, 404]);
});

test("a member of one site naming another site's path gets 404", async () => {
  const member = await bothWays('elsewhere@example.com', 'owner');
  const other = await h.newSite('Another site');
  for (const path of [`/sites/${other.id}/inbox/conversations`, `/sites/${other.id}`, `/sites/${other.id}/allowed-origins`]) {
    expect(await statuses(member.get(path))).toEqual([404, 404]);
  }
});
