/**
 * An owner's sites through /manage/v1 (a management token, as a script uses it): creating one,
 * renaming, the chat window's allowed origins and identity verification as the window's gateway
 * applies them, the identity secret's rotation, the embed snippet, roles, isolation and the audit
 * log. The real app, response validation on.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, memberWithToken, signIn, withToken } from './helpers';
import { identityHash } from '../../server/window/tokens';
import { getToken, ORIGIN, w } from '../window/helpers';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
let siteB: { id: string };
let owner: { id: string; token: string };
let agent: { id: string; token: string };
let outsider: { id: string; token: string };

type Method = Parameters<typeof withToken>[2];
const as = (who: { token: string }, method: Method, path: string, body?: object) => withToken(h, who, method, path, body);
const audit = async (siteId: string) =>
  (await as(owner, 'get', `/sites/${siteId}/audit-log?limit=100`)).body.data as {
    action: string;
    objectId: string;
    actor: { type: string; accountId: string };
    clientAddress: string | null;
  }[];
const gateway = (siteId: string, body: Record<string, unknown> = {}, origin = ORIGIN) =>
  request(h.app).post(w(siteId, '/token')).set('Origin', origin).send(body);

beforeAll(async () => {
  // Each reading of the clock moves it a millisecond, so audit entries sort in the order written.
  h = await manageHarness({ now: () => (clock += 1) });
  siteB = await h.newSite('Other site');
  owner = await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, h.site.id, 'agent@example.com', 'agent');
  outsider = await memberWithToken(h, siteB.id, 'outsider@example.com', 'owner');
});
afterAll(() => h.close());

test('an account creates a site and becomes its owner; the creation is audited with the actor and address', async () => {
  const res = await as(agent, 'post', '/sites', { name: '  Acme shop  ' });
  expect(res.status).toBe(201);
  expect(res.body.data).toEqual({
    id: expect.stringMatching(/^ws_/),
    name: 'Acme shop',
    createdAt: expect.any(String),
    allowedOrigins: [],
    identityMode: 'off',
    identitySecretSet: false,
  });
  const siteId = res.body.data.id;
  const me = await as(agent, 'get', '/me');
  expect(me.body.data.sites).toContainEqual(expect.objectContaining({ id: siteId, role: 'owner' }));
  // The CLI sees the same site.
  expect((await h.runtime.services.access.listSites()).map((s) => s.name)).toContain('Acme shop');

  const entries = (await request(h.app).get(`${M}/sites/${siteId}/audit-log`).set('Authorization', `Bearer ${agent.token}`)).body.data;
  expect(entries).toEqual([
    expect.objectContaining({
      action: 'site.created',
      objectId: siteId,
      actor: expect.objectContaining({ type: 'token', accountId: agent.id }),
      clientAddress: expect.any(String),
    }),
  ]);

  expect((await as(agent, 'post', '/sites', { name: '   ' })).status).toBe(400);
});

test('an agent gets 403 forbidden on every site and key operation; another site is 404 like a missing one', async () => {
  const s = h.site.id;
  const ops: [Method, string, object?][] = [
    ['get', `/sites/${s}`],
    ['patch', `/sites/${s}`, { name: 'x' }],
    ['get', `/sites/${s}/allowed-origins`],
    ['put', `/sites/${s}/allowed-origins`, { origins: [] }],
    ['post', `/sites/${s}/allowed-origins`, { origin: 'https://a.example' }],
    ['delete', `/sites/${s}/allowed-origins?origin=https%3A%2F%2Fa.example`],
    ['post', `/sites/${s}/identity-secret/rotate`],
    ['get', `/sites/${s}/embed`],
    ['get', `/sites/${s}/keys`],
    ['post', `/sites/${s}/keys`, { label: 'x', scopes: ['conversations:read'] }],
    ['delete', `/sites/${s}/keys/${h.site.keyId}`],
  ];
  for (const [method, path, body] of ops) {
    const refused = await as(agent, method, path, body);
    expect([method, path, refused.status, refused.body.error?.code]).toEqual([method, path, 403, 'forbidden']);
    const foreign = await as(outsider, method, path, body);
    const missing = await as(outsider, method, path.replace(s, 'ws_00000000000000000000000000'), body);
    expect([method, path, foreign.status]).toEqual([method, path, 404]);
    expect(foreign.body).toEqual(missing.body);
  }
  // Nothing changed: the key still works and the site kept its name.
  expect((await request(h.app).get('/api/v1/conversations').set('Authorization', `Bearer ${h.site.key}`)).status).toBe(200);
  expect((await as(owner, 'get', `/sites/${s}`)).body.data.name).toBe('Test site');
});

test('rename and identity mode: a new secret shows once, only when one is made', async () => {
  const siteId = (await as(owner, 'post', '/sites', { name: 'Modes' })).body.data.id;
  const renamed = await as(owner, 'patch', `/sites/${siteId}`, { name: 'Modes renamed' });
  expect(renamed.status).toBe(200);
  expect(renamed.body.data).toMatchObject({ name: 'Modes renamed', identityMode: 'off', identitySecretSet: false });
  expect(renamed.body.data.identitySecret).toBeUndefined();

  const optional = await as(owner, 'patch', `/sites/${siteId}`, { identityMode: 'optional' });
  expect(optional.body.data).toMatchObject({ identityMode: 'optional', identitySecretSet: true, identitySecret: expect.stringMatching(/^wis_/) });
  const enforce = await as(owner, 'patch', `/sites/${siteId}`, { identityMode: 'enforce' });
  expect(enforce.body.data).toMatchObject({ identityMode: 'enforce', identitySecretSet: true });
  expect(enforce.body.data.identitySecret).toBeUndefined();
  const read = await as(owner, 'get', `/sites/${siteId}`);
  expect(JSON.stringify(read.body)).not.toContain(optional.body.data.identitySecret);
  // What the CLI's `site update --identity-mode` would have set: the gateway enforces it.
  await as(owner, 'put', `/sites/${siteId}/allowed-origins`, { origins: [ORIGIN] });
  expect((await gateway(siteId)).status).toBe(401);
  const verified = await gateway(siteId, { userId: 'alice', userHash: identityHash(optional.body.data.identitySecret, 'alice') });
  expect(verified.status).toBe(201);
  expect(verified.body.data.verified).toBe(true);

  expect((await as(owner, 'patch', `/sites/${siteId}`, {})).status).toBe(400);
  expect((await as(owner, 'patch', `/sites/${siteId}`, { identityMode: 'required' })).status).toBe(400);
  expect((await audit(siteId)).map((e) => e.action)).toEqual(
    expect.arrayContaining(['site.renamed', 'site.identity_mode_changed.optional', 'site.identity_mode_changed.enforce', 'site.origins_replaced']),
  );
});

test('a rename with an identity mode is one change: when the mode cannot be written, the name stays too', async () => {
  const siteId = (await as(owner, 'post', '/sites', { name: 'Atomic' })).body.data.id;
  const before = (await audit(siteId)).length;
  // The window settings' write (the second part) fails after the rename was written.
  const store = h.runtime.services.stores.access;
  const spy = jest.spyOn(store, 'saveWindowSettings').mockImplementationOnce(async () => {
    throw new Error('disk on fire');
  });
  try {
    const res = await as(owner, 'patch', `/sites/${siteId}`, { name: 'Atomic renamed', identityMode: 'optional' });
    expect(res.status).toBe(500);
    expect(spy).toHaveBeenCalledTimes(1);
  } finally {
    spy.mockRestore();
  }
  const site = (await as(owner, 'get', `/sites/${siteId}`)).body.data;
  expect(site).toMatchObject({ name: 'Atomic', identityMode: 'off', identitySecretSet: false });
  // Neither change is in the audit log either.
  expect((await audit(siteId)).length).toBe(before);

  // Both parts written: one answer, both changes, both entries.
  const both = await as(owner, 'patch', `/sites/${siteId}`, { name: 'Atomic renamed', identityMode: 'optional' });
  expect(both.status).toBe(200);
  expect(both.body.data).toMatchObject({ name: 'Atomic renamed', identityMode: 'optional', identitySecret: expect.stringMatching(/^wis_/) });
  expect(
    (await audit(siteId))
      .slice(0, 2)
      .map((e) => e.action)
      .sort(),
  ).toEqual(['site.identity_mode_changed.optional', 'site.renamed']);
});

test("allowed origins: each change takes effect on the window's gateway at once", async () => {
  const siteId = (await as(owner, 'post', '/sites', { name: 'Origins' })).body.data.id;
  const origins = `/sites/${siteId}/allowed-origins`;
  expect((await gateway(siteId)).status).toBe(401); // no origin allowed: the window is off

  const added = await as(owner, 'post', origins, { origin: 'HTTPS://Shop.Example:443' });
  expect(added.status).toBe(200);
  expect(added.body.data).toEqual([ORIGIN]);
  const token = (await gateway(siteId)).body.data.token as string;
  expect(token).toBeTruthy();
  expect((await as(owner, 'post', origins, { origin: ORIGIN })).body.data).toEqual([ORIGIN]); // already listed

  const replaced = await as(owner, 'put', origins, { origins: ['https://b.example', 'http://localhost:3000', 'https://b.example'] });
  expect(replaced.body.data).toEqual(['http://localhost:3000', 'https://b.example']);
  expect((await gateway(siteId)).status).toBe(401);
  // A window already open on the removed origin is refused at its next request.
  expect((await request(h.app).get(w(siteId, '/conversation')).set('Authorization', `Bearer ${token}`).set('Origin', ORIGIN)).status).toBe(401);
  expect((await gateway(siteId, {}, 'https://b.example')).status).toBe(201);

  const removed = await as(owner, 'delete', `${origins}?origin=${encodeURIComponent('https://b.example')}`);
  expect(removed.body.data).toEqual(['http://localhost:3000']);
  expect((await gateway(siteId, {}, 'https://b.example')).status).toBe(401);
  expect((await as(owner, 'get', origins)).body.data).toEqual(['http://localhost:3000']);

  const notListed = await as(owner, 'delete', `${origins}?origin=${encodeURIComponent('https://b.example')}`);
  expect(notListed.status).toBe(404);
  const plainHttp = await as(owner, 'post', origins, { origin: 'http://shop.example' });
  expect(plainHttp.status).toBe(400);
  expect(plainHttp.body.error.message).toMatch(/https/);
  const tooMany = await as(owner, 'put', origins, { origins: Array.from({ length: 21 }, (_, i) => `https://s${i}.example`) });
  expect(tooMany.status).toBe(400);

  expect((await audit(siteId)).map((e) => e.action).filter((a) => a.startsWith('site.origin'))).toEqual([
    'site.origin_removed',
    'site.origins_replaced',
    'site.origin_added',
    'site.origin_added',
  ]);
});

test('identity secret rotation: shown once, tokens verified with the old secret are refused, the new one verifies', async () => {
  const siteId = (await as(owner, 'post', '/sites', { name: 'Rotation' })).body.data.id;
  await as(owner, 'put', `/sites/${siteId}/allowed-origins`, { origins: [ORIGIN] });
  const first = (await as(owner, 'patch', `/sites/${siteId}`, { identityMode: 'optional' })).body.data.identitySecret as string;
  const before = await getToken(h.app, siteId, { userId: 'alice', userHash: identityHash(first, 'alice') });
  expect(before.verified).toBe(true);

  const rotated = await as(owner, 'post', `/sites/${siteId}/identity-secret/rotate`);
  expect(rotated.status).toBe(200);
  expect(rotated.body.data).toEqual({ identityMode: 'optional', identitySecretSet: true, identitySecret: expect.stringMatching(/^wis_/) });
  const second = rotated.body.data.identitySecret as string;
  expect(second).not.toBe(first);

  const old = await request(h.app).get(w(siteId, '/conversation')).set('Authorization', `Bearer ${before.token}`).set('Origin', ORIGIN);
  expect(old.status).toBe(401);
  expect(old.body.error.message).toMatch(/identity secret changed/);
  expect((await gateway(siteId, { userId: 'alice', userHash: identityHash(first, 'alice') })).status).toBe(401);
  expect((await getToken(h.app, siteId, { userId: 'alice', userHash: identityHash(second, 'alice') })).verified).toBe(true);

  // Never shown again.
  for (const path of [`/sites/${siteId}`, `/sites/${siteId}/embed`, `/sites/${siteId}/audit-log`]) {
    expect(JSON.stringify((await as(owner, 'get', path)).body)).not.toContain(second);
  }
  const entries = await audit(siteId);
  expect(entries[0]).toMatchObject({ action: 'site.identity_secret_rotated', objectId: siteId, actor: { type: 'token', accountId: owner.id } });
});

test('the embed snippet is the one script tag of docs/window.md', async () => {
  const siteId = h.site.id;
  await as(owner, 'put', `/sites/${siteId}/allowed-origins`, { origins: [ORIGIN] });
  const res = await as(owner, 'get', `/sites/${siteId}/embed`);
  expect(res.status).toBe(200);
  const base = h.runtime.services.config.windowPublicUrl ?? h.runtime.services.config.publicUrl;
  expect(res.body.data).toEqual({
    siteId,
    scriptUrl: `${base}/window/v1/loader.js`,
    snippet: `<script async src="${base}/window/v1/loader.js" data-site="${siteId}"></script>`,
    allowedOrigins: [ORIGIN],
  });
  // The loader it names is served.
  expect((await request(h.app).get(new URL(res.body.data.scriptUrl).pathname)).status).toBe(200);
});

test('a session cookie works too, and a change from another site is refused before anything happens', async () => {
  const { cookie } = await signIn(h, 'owner@example.com');
  const crossSite = await request(h.app).post(`${M}/sites`).set('Sec-Fetch-Site', 'cross-site').set('Cookie', cookie).send({ name: 'Forged' });
  expect(crossSite.status).toBe(403);
  expect(crossSite.body.error.code).toBe('cross_site_request');
  expect((await h.runtime.services.access.listSites()).map((s) => s.name)).not.toContain('Forged');
  const sameOrigin = await request(h.app).post(`${M}/sites`).set('Sec-Fetch-Site', 'same-origin').set('Cookie', cookie).send({ name: 'From the dashboard' });
  expect(sameOrigin.status).toBe(201);
});
