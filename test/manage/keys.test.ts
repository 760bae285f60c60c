/**
 * A site's access keys through /manage/v1: the value shown once and working on the public API,
 * the list with its creator and last use, keyset paging, revocation refused by the public API on
 * the next request, isolation, and the audit log. The keys are the CLI's (one access service).
 */
import request from 'supertest';
import { loggedApp } from '../helpers/test-app';
import type { Harness } from '../helpers/harness';
import { manageHarness, memberWithToken, withToken } from './helpers';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
let owner: { id: string; token: string };
let other: { id: string; token: string };
let siteB: { id: string; key: string; keyId: string };

type Method = Parameters<typeof withToken>[2];
const as = (who: { token: string }, method: Method, path: string, body?: object) => withToken(h, who, method, path, body);
const publicApi = (key: string) => request(h.app).get('/api/v1/conversations').set('Authorization', `Bearer ${key}`);
const auditOf = async (siteId: string) =>
  ((await as(owner, 'get', `/sites/${siteId}/audit-log?limit=100`)).body.data as { action: string; objectId: string; actor: { accountId: string } }[]).map(
    (e) => `${e.action} ${e.objectId}`,
  );

beforeAll(async () => {
  h = await manageHarness({ now: () => (clock += 1) });
  siteB = await h.newSite('Other site');
  owner = await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
  other = await memberWithToken(h, siteB.id, 'other@example.com', 'owner');
});
afterAll(() => h.close());

test('a key is shown once, works on the public API with its rights, and the list shows who made it and its last use', async () => {
  const created = await as(owner, 'post', `/sites/${h.site.id}/keys`, { label: 'Zapier', scopes: ['conversations:read'] });
  expect(created.status).toBe(201);
  const key = created.body.data;
  expect(key).toEqual({
    id: expect.stringMatching(/^key_/),
    siteId: h.site.id,
    label: 'Zapier',
    prefix: key.key.slice(0, 12),
    scopes: ['conversations:read'],
    createdBy: owner.id,
    createdAt: expect.any(String),
    lastUsedAt: null,
    revokedAt: null,
    key: expect.stringMatching(/^wck_[0-9A-Za-z]{43}$/),
  });

  // Its rights on the public API: it reads, it may not write.
  expect((await publicApi(key.key)).status).toBe(200);
  const conversation = (await h.visitorSay(h.site.id, 'v-keys', 'Hello')).conversation.id;
  const write = await request(h.app).post(`/api/v1/conversations/${conversation}/messages`).set('Authorization', `Bearer ${key.key}`).send({ content: 'hi' });
  expect(write.status).toBe(403);
  expect(write.body.error.code).toBe('insufficient_scope');

  const listed = await as(owner, 'get', `/sites/${h.site.id}/keys`);
  expect(listed.status).toBe(200);
  expect(JSON.stringify(listed.body)).not.toContain(key.key);
  const row = listed.body.data.find((k: { id: string }) => k.id === key.id);
  expect(row).toEqual({ ...key, key: undefined, lastUsedAt: expect.any(String) });
  expect(Date.parse(row.lastUsedAt)).toBeGreaterThanOrEqual(Date.parse(key.createdAt));
  // The harness's key was made through the CLI's service call: no creator.
  expect(listed.body.data.find((k: { id: string }) => k.id === h.site.keyId)).toMatchObject({ createdBy: null });
  // The CLI lists the same key with its creator.
  expect((await h.runtime.services.access.listKeys(h.site.id)).find((k) => k.id === key.id)).toMatchObject({ createdBy: owner.id, label: 'Zapier' });

  expect(await auditOf(h.site.id)).toContain(`key.created ${key.id}`);
});

test('revoking a key makes the public API refuse it at the next request; again changes nothing', async () => {
  const key = (await as(owner, 'post', `/sites/${h.site.id}/keys`, { label: 'short-lived', scopes: ['conversations:read', 'conversations:write'] })).body.data;
  expect((await publicApi(key.key)).status).toBe(200);

  const revoked = await as(owner, 'delete', `/sites/${h.site.id}/keys/${key.id}`);
  expect(revoked.status).toBe(200);
  expect(revoked.body.data).toMatchObject({ id: key.id, revokedAt: expect.any(String), createdBy: owner.id });
  const refused = await publicApi(key.key);
  expect(refused.status).toBe(401);
  expect(refused.body.error.code).toBe('unauthorized');

  const again = await as(owner, 'delete', `/sites/${h.site.id}/keys/${key.id}`);
  expect(again.status).toBe(200);
  expect(again.body.data.revokedAt).toBe(revoked.body.data.revokedAt);
  expect((await auditOf(h.site.id)).filter((e) => e === `key.revoked ${key.id}`)).toHaveLength(1);
});

test("another site's key is 404 and stays usable; a missing key is 404 too", async () => {
  const foreign = await as(owner, 'delete', `/sites/${h.site.id}/keys/${siteB.keyId}`);
  expect(foreign.status).toBe(404);
  const missing = await as(owner, 'delete', `/sites/${h.site.id}/keys/key_00000000000000000000000000`);
  expect(missing.status).toBe(404);
  expect((await publicApi(siteB.key)).status).toBe(200);
  // Its owner may not reach this site's keys either.
  expect((await as(other, 'get', `/sites/${h.site.id}/keys`)).status).toBe(404);
  expect((await as(other, 'post', `/sites/${h.site.id}/keys`, { label: 'x', scopes: ['conversations:read'] })).status).toBe(404);
});

test('the list pages by keyset, oldest first, and a cursor of another site is refused', async () => {
  const site = (await as(other, 'get', '/me')).body.data.sites[0].id as string;
  const made: string[] = [siteB.keyId];
  for (let i = 0; i < 4; i++) made.push((await as(other, 'post', `/sites/${site}/keys`, { label: `k${i}`, scopes: ['media:read'] })).body.data.id);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: request.Response = await as(other, 'get', `/sites/${site}/keys?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    expect(page.status).toBe(200);
    expect(page.body.data.length).toBeLessThanOrEqual(2);
    seen.push(...page.body.data.map((k: { id: string }) => k.id));
    cursor = page.body.page.nextCursor;
    expect(page.body.page.hasMore).toBe(cursor !== null);
  } while (cursor);
  expect(seen).toEqual(made);

  const first = await as(other, 'get', `/sites/${site}/keys?limit=1`);
  const misused = await as(owner, 'get', `/sites/${h.site.id}/keys?cursor=${first.body.page.nextCursor}`);
  expect(misused.status).toBe(400);
});

test('bad input gets a clear 400: no rights, an unknown right, no label', async () => {
  for (const body of [{ label: 'x', scopes: [] }, { label: 'x', scopes: ['everything'] }, { scopes: ['media:read'] }, { label: '', scopes: ['media:read'] }]) {
    const res = await as(owner, 'post', `/sites/${h.site.id}/keys`, body);
    expect([JSON.stringify(body), res.status, res.body.error.code]).toEqual([JSON.stringify(body), 400, 'invalid_request']);
    expect(res.body.error.details.length).toBeGreaterThan(0);
  }
});

test('the CLI still issues, lists and revokes keys through the same service', async () => {
  const access = h.runtime.services.access;
  const made = await access.createKey(h.site.id, ['conversations:read'], 'from the CLI');
  expect(made).toEqual({ id: expect.stringMatching(/^key_/), key: expect.stringMatching(/^wck_/), scopes: ['conversations:read'] });
  const listed = (await as(owner, 'get', `/sites/${h.site.id}/keys?limit=100`)).body.data.find((k: { id: string }) => k.id === made.id);
  expect(listed).toMatchObject({ label: 'from the CLI', createdBy: null, revokedAt: null });
  await access.revokeKey(made.id);
  expect((await publicApi(made.key)).status).toBe(401);
});

test('logs carry neither a new key nor an identity secret', async () => {
  const { app, lines } = loggedApp(h.runtime.services, h.limiter);
  const send = (method: 'post' | 'get', path: string, body?: object) =>
    request(app)[method](`/manage/v1${path}`).set('Authorization', `Bearer ${owner.token}`).send(body);
  const key = (await send('post', `/sites/${h.site.id}/keys`, { label: 'logged?', scopes: ['media:read'] })).body.data.key as string;
  const secret = (await send('post', `/sites/${h.site.id}/identity-secret/rotate`)).body.data.identitySecret as string;
  const failing = jest.spyOn(h.runtime.services.siteAdmin, 'listKeys').mockRejectedValueOnce(new Error('kaboom'));
  expect((await send('get', `/sites/${h.site.id}/keys`)).status).toBe(500);
  failing.mockRestore();
  await new Promise((r) => setTimeout(r, 50));
  const all = lines().join('\n');
  expect(all).toContain('kaboom');
  for (const value of [key, secret, owner.token]) {
    expect(value).toMatch(/^w[a-z]{2}_/);
    expect(all).not.toContain(value);
  }
});
