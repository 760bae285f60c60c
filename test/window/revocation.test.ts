/**
 * What ends a window session before its token does: a rotated identity secret, identity
 * verification turned off, the session's age cap, an operator's revocation of one visitor or of a
 * whole site.
 */
import { createHmac } from 'node:crypto';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { identityHash, VISITOR_CREDENTIAL_TTL_SECONDS, WINDOW_SESSION_MAX_SECONDS } from '../../server/window/tokens';
import { deriveKey } from '../../server/platform/crypto';
import { loadMasterKey } from '../../server/platform/master-key';
import { migrationSource } from '../../server/db/migrations';
import { allowOrigins, auth, getToken, ORIGIN, w, windowHarnessWithClock } from './helpers';

let h: Harness;
const clock = windowHarnessWithClock((made) => (h = made));
const now = () => clock.now();

const read = (siteId: string, token: string) => request(h.app).get(w(siteId, '/conversation')).set(auth(token)).set('Origin', ORIGIN);
const refresh = (siteId: string, token: string) => request(h.app).post(w(siteId, '/token/refresh')).set(auth(token)).set('Origin', ORIGIN);
const gateway = (siteId: string, body: Record<string, unknown>) => request(h.app).post(w(siteId, '/token')).set('Origin', ORIGIN).send(body);
const payloadOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
/** Revocation voids what began at or before its millisecond: the tests' next sessions begin later. */
const revoke = async (siteId: string, visitorId: string | null) => {
  const r = await h.runtime.services.access.revokeVisitors(siteId, visitorId);
  clock.offsetMs += 2;
  return r;
};

describe('verified visitors and the identity secret', () => {
  let siteId: string;
  let secret: string;
  beforeEach(async () => {
    siteId = (await h.newSite('Verified')).id;
    await allowOrigins(h, siteId);
    secret = (await h.runtime.services.access.setIdentity(siteId, { mode: 'optional' })).identitySecret!;
  });
  const alice = (key = secret) => getToken(h.app, siteId, { userId: 'alice', userHash: identityHash(key, 'alice') });

  test('after a rotation the old verified token is refused, on a request and on refresh; a new hash gets the same history', async () => {
    const before = await alice();
    const sent = await request(h.app).post(w(siteId, '/messages')).set(auth(before.token)).send({ content: 'my order', clientMessageId: 'r-1' });
    expect(sent.status).toBe(201);
    const refreshed = await refresh(siteId, before.token);
    expect(refreshed.status).toBe(201);

    const rotated = (await h.runtime.services.access.setIdentity(siteId, { rotateSecret: true })).identitySecret!;
    for (const token of [before.token, refreshed.body.data.token]) {
      const res = await read(siteId, token);
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/identity secret changed/);
      const history = await request(h.app)
        .get(w(siteId, `/conversations/${sent.body.data.conversation.id}/messages`))
        .set(auth(token));
      expect(history.status).toBe(401);
      expect((await refresh(siteId, token)).status).toBe(401);
    }
    const after = await alice(rotated);
    expect(after.visitorId).toBe('user:alice');
    expect((await read(siteId, after.token)).body.data.conversation.id).toBe(sent.body.data.conversation.id);
    expect((await refresh(siteId, after.token)).status).toBe(201);
  });

  test('with identity verification turned off verified tokens are refused; anonymous ones still work', async () => {
    const verified = await alice();
    const anonymous = await getToken(h.app, siteId);
    await h.runtime.services.access.setIdentity(siteId, { mode: 'off' });
    const res = await read(siteId, verified.token);
    expect(res.status).toBe(401);
    expect(res.body.error.message).toMatch(/no longer verifies/);
    expect((await refresh(siteId, verified.token)).status).toBe(401);
    expect((await read(siteId, anonymous.token)).status).toBe(200);
    expect((await refresh(siteId, anonymous.token)).status).toBe(201);
  });

  test('changing between optional and enforce keeps verified sessions', async () => {
    const verified = await alice();
    await h.runtime.services.access.setIdentity(siteId, { mode: 'enforce' });
    expect((await read(siteId, verified.token)).status).toBe(200);
    expect((await refresh(siteId, verified.token)).status).toBe(201);
  });
});

describe('the session age cap', () => {
  test(`a session ends ${WINDOW_SESSION_MAX_SECONDS / 3600} hours after its gateway call, however often it is refreshed; the gateway starts a new one`, async () => {
    const first = await getToken(h.app, h.site.id);
    const start: number = payloadOf(first.token).st;
    const capEnd = start + WINDOW_SESSION_MAX_SECONDS * 1000;
    const at = (t: number) => {
      clock.offsetMs = t - Date.now();
    };
    let token = first.token;
    let credential = first.visitorCredential!;
    // A window that refreshes every nine minutes, as the panel does (refreshAfter is 8 of 10).
    for (let t = start + 540_000; t <= capEnd - 540_000; t += 540_000) {
      at(t);
      const res = await refresh(h.site.id, token);
      expect(res.status).toBe(201);
      expect(Date.parse(res.body.data.expiresAt)).toBeLessThanOrEqual(capEnd);
      expect(payloadOf(res.body.data.token).st).toBe(start);
      token = res.body.data.token;
      credential = res.body.data.visitorCredential;
    }
    // The last token of the session ends with it, not ten minutes after.
    at(capEnd - 30_000);
    const last = await refresh(h.site.id, token);
    expect(last.status).toBe(201);
    expect(Date.parse(last.body.data.expiresAt)).toBe(capEnd);
    expect(last.body.data.expiresIn).toBeLessThanOrEqual(30);
    at(capEnd + 1);
    for (const res of [await refresh(h.site.id, last.body.data.token), await read(h.site.id, last.body.data.token)]) {
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/session is over/);
    }
    // Back at the gateway the visitor comes back as itself, in a new session.
    const again = await getToken(h.app, h.site.id, { visitorCredential: credential });
    expect(again.visitorId).toBe(first.visitorId);
    expect(payloadOf(again.token).st).toBeGreaterThan(capEnd);
  });
});

describe('revoking visitors', () => {
  test('one visitor: its credentials (also one renewed by a refresh) and its current tokens are refused; others keep theirs', async () => {
    const alice = await getToken(h.app, h.site.id);
    const bob = await getToken(h.app, h.site.id);
    const renewed = (await refresh(h.site.id, alice.token)).body.data;
    const first = await revoke(h.site.id, alice.visitorId);
    expect(first).toEqual({ siteId: h.site.id, visitorId: alice.visitorId, revokedBefore: expect.stringMatching(/Z$/) });

    for (const token of [alice.token, renewed.token]) {
      const res = await read(h.site.id, token);
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/revoked/);
      expect((await refresh(h.site.id, token)).status).toBe(401);
    }
    for (const visitorCredential of [alice.visitorCredential, renewed.visitorCredential]) {
      const res = await gateway(h.site.id, { visitorCredential });
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/revoked/);
    }
    expect((await read(h.site.id, bob.token)).status).toBe(200);
    expect((await getToken(h.app, h.site.id, { visitorCredential: bob.visitorCredential })).visitorId).toBe(bob.visitorId);
    // Alice's window starts over as a new visitor.
    const fresh = await getToken(h.app, h.site.id);
    expect(fresh.visitorId).not.toBe(alice.visitorId);

    // Revoking again moves the time forward.
    const second = await revoke(h.site.id, alice.visitorId);
    expect(Date.parse(second.revokedBefore)).toBeGreaterThan(Date.parse(first.revokedBefore));
  });

  test('a verified visitor: its sessions end; its page vouching for it again starts a new one', async () => {
    const site = await h.newSite('Verified revocation');
    await allowOrigins(h, site.id);
    const secret = (await h.runtime.services.access.setIdentity(site.id, { mode: 'optional' })).identitySecret!;
    const body = { userId: 'alice', userHash: identityHash(secret, 'alice') };
    const before = await getToken(h.app, site.id, body);
    await revoke(site.id, 'user:alice');
    expect((await read(site.id, before.token)).status).toBe(401);
    const after = await getToken(h.app, site.id, body);
    expect((await read(site.id, after.token)).status).toBe(200);
  });

  test("every visitor of a site: all its credentials and tokens are refused; other sites' are not", async () => {
    const site = await h.newSite('Revoke all');
    const other = await h.newSite('Untouched');
    await allowOrigins(h, site.id);
    await allowOrigins(h, other.id);
    const mine = [await getToken(h.app, site.id), await getToken(h.app, site.id)];
    const theirs = await getToken(h.app, other.id);
    const all = await revoke(site.id, null);
    expect(all).toEqual({ siteId: site.id, visitorId: null, revokedBefore: expect.stringMatching(/Z$/) });
    for (const t of mine) {
      expect((await read(site.id, t.token)).status).toBe(401);
      expect((await gateway(site.id, { visitorCredential: t.visitorCredential })).status).toBe(401);
    }
    expect((await read(other.id, theirs.token)).status).toBe(200);
    expect((await getToken(h.app, other.id, { visitorCredential: theirs.visitorCredential })).visitorId).toBe(theirs.visitorId);
    const fresh = await getToken(h.app, site.id);
    expect((await read(site.id, fresh.token)).status).toBe(200);
    // The site keeps its window settings: a revocation on a site with none made them, identity off.
    expect((await h.runtime.services.access.listSites()).find((s) => s.id === site.id)).toMatchObject({ identityMode: 'off', identitySecretSet: false });
  });

  test('a credential issued before credentials carried an issue time still lets its visitor in, and is revoked like the others', async () => {
    // Signed as the service signed them then: site, visitor and expiry only.
    const key = deriveKey(loadMasterKey(h.config.dataDir, h.config.masterKey), 'window-visitor-credentials');
    const body = Buffer.from(JSON.stringify({ s: h.site.id, v: 'vis_from_before', exp: now() + VISITOR_CREDENTIAL_TTL_SECONDS * 1000 - 3_600_000 })).toString(
      'base64url',
    );
    const legacy = `wvc1.${body}.${createHmac('sha256', key).update(`wvc1.${body}`).digest('base64url')}`;
    const back = await getToken(h.app, h.site.id, { visitorCredential: legacy });
    expect(back.visitorId).toBe('vis_from_before');
    await revoke(h.site.id, 'vis_from_before');
    expect((await gateway(h.site.id, { visitorCredential: legacy })).status).toBe(401);
    expect((await read(h.site.id, back.token)).status).toBe(401);
  });

  test('refuses an unknown site or a malformed visitor id', async () => {
    await expect(h.runtime.services.access.revokeVisitors('ws_00000000000000000000000000', null)).rejects.toMatchObject({ code: 'not_found' });
    await expect(h.runtime.services.access.revokeVisitors(h.site.id, 'has space')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(h.runtime.services.access.revokeVisitors(h.site.id, 'x'.repeat(129))).rejects.toMatchObject({ code: 'invalid_request' });
  });
});

describe('migration 006', () => {
  test('rolls back and applies again', async () => {
    const db = h.runtime.db;
    await db.migrate.down({ migrationSource, name: '006_window_revocation' });
    expect(await db.schema.hasTable('window_visitor_revocations')).toBe(false);
    expect(await db.schema.hasColumn('site_window_settings', 'visitors_revoked_before')).toBe(false);
    await db.migrate.latest({ migrationSource });
    expect(await db.schema.hasTable('window_visitor_revocations')).toBe(true);
    expect(await db.schema.hasColumn('site_window_settings', 'visitors_revoked_before')).toBe(true);
  });
});
