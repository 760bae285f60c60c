import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';
import { identityHash } from '../../server/window/tokens';
import { siteCommands } from '../../server/cli/commands/sites';
import { parseArgs } from '../../server/cli/args';
import { normaliseOrigin } from '../../server/access/service';
import { allowOrigins, auth, getToken, ORIGIN, OTHER_ORIGIN, w, windowHarnessWithClock } from './helpers';

let h: Harness;
const clock = windowHarnessWithClock((made) => (h = made));

const conversation = (siteId: string) => w(siteId, '/conversation');

describe('allowed origins', () => {
  test('are exact origins: normalised, https (http only for loopback), no paths or wildcards', () => {
    expect(normaliseOrigin('https://Shop.Example:443')).toBe('https://shop.example');
    expect(normaliseOrigin('https://shop.example:8443/')).toBe('https://shop.example:8443');
    expect(normaliseOrigin('http://localhost:5173')).toBe('http://localhost:5173');
    expect(normaliseOrigin('http://127.0.0.1:3000')).toBe('http://127.0.0.1:3000');
    for (const bad of [
      'http://shop.example',
      'https://*.shop.example',
      'https://shop.example/path',
      'https://shop.example?x=1',
      'shop.example',
      'ftp://shop.example',
      'https://u:p@shop.example',
      '',
    ]) {
      expect(() => normaliseOrigin(bad)).toThrow();
    }
  });

  test('site update sets them and the identity mode; site list shows them; the secret is shown once', async () => {
    const site = await h.runtime.services.access.createSite('CLI site');
    const run = (line: string[]) => {
      const name = line.slice(0, 2).join(' ');
      const args = parseArgs(line.slice(2), siteCommands[name].options);
      return siteCommands[name].run(h.runtime, args);
    };
    const updated = await run([
      'site',
      'update',
      '--site',
      site.id,
      '--allowed-origins',
      'https://a.example, https://B.example:8443',
      '--identity-mode',
      'optional',
    ]);
    const json = updated.json as { allowedOrigins: string[]; identityMode: string; identitySecret?: string; identitySecretSet: boolean };
    expect(json.allowedOrigins).toEqual(['https://a.example', 'https://b.example:8443']);
    expect(json.identityMode).toBe('optional');
    expect(json.identitySecret).toMatch(/^wis_[0-9A-Za-z]{43,}$/);
    const listed = (
      (await run(['site', 'list'])).json as {
        sites: { id: string; allowedOrigins: string[]; identityMode: string; identitySecret?: string; identitySecretSet: boolean }[];
      }
    ).sites.find((s) => s.id === site.id)!;
    expect(listed).toMatchObject({ allowedOrigins: ['https://a.example', 'https://b.example:8443'], identityMode: 'optional', identitySecretSet: true });
    expect(listed.identitySecret).toBeUndefined();
    expect((await run(['site', 'list'])).text).toContain('https://a.example,https://b.example:8443');
    // Changing the mode again keeps the secret (not shown); clearing the origins turns the window off.
    const again = (await run(['site', 'update', '--site', site.id, '--identity-mode', 'enforce', '--allowed-origins='])).json as {
      identitySecret?: string;
      allowedOrigins: string[];
    };
    expect(again.identitySecret).toBeUndefined();
    expect(again.allowedOrigins).toEqual([]);
    await expect(run(['site', 'update', '--site', site.id, '--allowed-origins', 'http://shop.example'])).rejects.toThrow(/https/);
    await expect(run(['site', 'update', '--site', site.id, '--identity-mode', 'sometimes'])).rejects.toThrow(/identity-mode/);
  });
});

describe('the gateway', () => {
  test('issues a short-lived token and a visitor credential to an allowed origin, with CORS for it', async () => {
    const res = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).send({});
    expect(res.status).toBe(201);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers.vary).toMatch(/Origin/);
    const t = res.body.data;
    expect(t).toMatchObject({ tokenType: 'Bearer', expiresIn: 600, refreshAfter: 480, verified: false });
    expect(t.visitorId).toMatch(/^vis_/);
    expect(t.token).toMatch(/^wwt1\./);
    expect(t.visitorCredential).toMatch(/^wvc1\./);
    const ok = await request(h.app).get(conversation(h.site.id)).set(auth(t.token)).set('Origin', ORIGIN);
    expect(ok.status).toBe(200);
    expect(ok.body.data).toEqual({ conversation: null, lastEventId: 'start' });
  });

  test('refuses an origin that is not allowed, without CORS headers', async () => {
    for (const origin of [OTHER_ORIGIN, 'null', 'https://shop.example.evil.example', 'http://shop.example']) {
      const res = await request(h.app).post(w(h.site.id, '/token')).set('Origin', origin).send({});
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
    }
    const none = await request(h.app).post(w(h.site.id, '/token')).send({});
    expect(none.status).toBe(401);
  });

  test("the panel on the service's own origin gets a token for the allowed page that framed it, and only for that", async () => {
    const SERVICE = 'https://localhost:8443';
    const panel = await request(h.app).post(w(h.site.id, '/token')).set('Origin', SERVICE).send({ hostOrigin: ORIGIN });
    expect(panel.status).toBe(201);
    expect(panel.headers['access-control-allow-origin']).toBeUndefined(); // same origin: no CORS needed
    const claims = JSON.parse(Buffer.from(panel.body.data.token.split('.')[1], 'base64url').toString());
    expect(claims.o).toBe(ORIGIN);
    // The host page itself may then not be swapped for another.
    const used = await request(h.app).get(conversation(h.site.id)).set(auth(panel.body.data.token)).set('Origin', 'https://second.example');
    expect(used.status).toBe(401);
    for (const body of [{}, { hostOrigin: OTHER_ORIGIN }, { hostOrigin: 'https://localhost:8443' }]) {
      const res = await request(h.app).post(w(h.site.id, '/token')).set('Origin', SERVICE).send(body);
      expect(res.status).toBe(401);
    }
    // A host page cannot claim to be another page.
    const lying = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).send({ hostOrigin: 'https://second.example' });
    expect(lying.status).toBe(401);
    const honest = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).send({ hostOrigin: ORIGIN });
    expect(honest.status).toBe(201);
  });

  test('refuses a site that has no allowed origins, or does not exist', async () => {
    const bare = await h.newSite('No window');
    const res = await request(h.app).post(w(bare.id, '/token')).set('Origin', ORIGIN).send({});
    expect(res.status).toBe(401);
    const missing = await request(h.app).post(w('ws_00000000000000000000000000', '/token')).set('Origin', ORIGIN).send({});
    expect(missing.status).toBe(401);
  });

  test('refuses an expired token, and refresh before expiry keeps the visitor', async () => {
    const t = await getToken(h.app, h.site.id);
    clock.offsetMs = 590_000; // ten seconds left: refresh
    const refreshed = await request(h.app).post(w(h.site.id, '/token/refresh')).set(auth(t.token)).set('Origin', ORIGIN);
    expect(refreshed.status).toBe(201);
    expect(refreshed.body.data.visitorId).toBe(t.visitorId);
    clock.offsetMs = 601_000; // the first token is over; the refreshed one is not
    const expired = await request(h.app).get(conversation(h.site.id)).set(auth(t.token));
    expect(expired.status).toBe(401);
    expect(expired.body.error.message).toMatch(/expired/);
    const fresh = await request(h.app).get(conversation(h.site.id)).set(auth(refreshed.body.data.token));
    expect(fresh.status).toBe(200);
    const lateRefresh = await request(h.app).post(w(h.site.id, '/token/refresh')).set(auth(t.token));
    expect(lateRefresh.status).toBe(401);
  });

  test('refuses a tampered token', async () => {
    const t = await getToken(h.app, h.site.id);
    const [kind, payload, mac] = t.token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, v: 'vis_someone_else' })).toString('base64url');
    const flippedMac = mac.slice(0, -1) + (mac.endsWith('A') ? 'B' : 'A');
    for (const bad of [`${kind}.${forged}.${mac}`, `${kind}.${payload}.${flippedMac}`, `${kind}.${payload}`, 'wck_notawindowtoken', t.visitorCredential!]) {
      const res = await request(h.app).get(conversation(h.site.id)).set(auth(bad));
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    const missing = await request(h.app).get(conversation(h.site.id));
    expect(missing.status).toBe(401);
  });

  test('refuses a token used for another site, or from another origin', async () => {
    const other = await h.newSite('Other');
    await allowOrigins(h, other.id, [ORIGIN, 'https://second.example']);
    await allowOrigins(h, h.site.id, [ORIGIN, 'https://second.example']);
    try {
      const t = await getToken(h.app, h.site.id);
      const otherSite = await request(h.app).get(conversation(other.id)).set(auth(t.token)).set('Origin', ORIGIN);
      expect(otherSite.status).toBe(401);
      expect(otherSite.body.error.message).toMatch(/another site/);
      // Another allowed origin of the same site still may not use a token issued to the first.
      const otherOrigin = await request(h.app).get(conversation(h.site.id)).set(auth(t.token)).set('Origin', 'https://second.example');
      expect(otherOrigin.status).toBe(401);
      expect(otherOrigin.body.error.message).toMatch(/another origin/);
      const evil = await request(h.app).get(conversation(h.site.id)).set(auth(t.token)).set('Origin', OTHER_ORIGIN);
      expect(evil.status).toBe(401);
      // The panel on the service's own origin may use it (the loader hands the token over).
      const panel = await request(h.app).get(conversation(h.site.id)).set(auth(t.token)).set('Origin', 'https://localhost:8443');
      expect(panel.status).toBe(200);
      // Removing the origin from the site stops its tokens at once.
      await allowOrigins(h, h.site.id, ['https://second.example']);
      const removed = await request(h.app).get(conversation(h.site.id)).set(auth(t.token));
      expect(removed.status).toBe(401);
    } finally {
      await allowOrigins(h, h.site.id, [ORIGIN]);
    }
  });

  test('a returning visitor comes back with its credential; a forged or foreign credential is refused', async () => {
    const first = await getToken(h.app, h.site.id);
    const again = await getToken(h.app, h.site.id, { visitorCredential: first.visitorCredential });
    expect(again.visitorId).toBe(first.visitorId);
    const [kind, payload, mac] = first.visitorCredential!.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const stolen = `${kind}.${Buffer.from(JSON.stringify({ ...claims, v: 'vis_victim' })).toString('base64url')}.${mac}`;
    const res = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).send({ visitorCredential: stolen });
    expect(res.status).toBe(401);
    const other = await h.newSite('Foreign');
    await allowOrigins(h, other.id);
    const foreign = await request(h.app).post(w(other.id, '/token')).set('Origin', ORIGIN).send({ visitorCredential: first.visitorCredential });
    expect(foreign.status).toBe(401);
    expect(foreign.body.error.message).toMatch(/another site/);
    // A window token is not a visitor credential, and neither opens the public API.
    const asCredential = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).send({ visitorCredential: first.token });
    expect(asCredential.status).toBe(401);
    const api = await request(h.app).get('/api/v1/conversations').set(bearer(first.token));
    expect(api.status).toBe(401);
  });

  test('rejects bodies that do not match the document', async () => {
    const cases: unknown[] = [{ visitorCredential: 5 }, { userId: 'has space', userHash: 'a'.repeat(64) }, { userHash: 'xyz' }, { extra: true }, [1, 2]];
    for (const body of cases) {
      const res = await request(h.app)
        .post(w(h.site.id, '/token'))
        .set('Origin', ORIGIN)
        .send(body as object);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
    const text = await request(h.app).post(w(h.site.id, '/token')).set('Origin', ORIGIN).set('Content-Type', 'text/plain').send('hi');
    expect([400, 415]).toContain(text.status);
    expect(text.body.error).toBeDefined();
  });
});

describe('identity verification', () => {
  let site: { id: string; key: string };
  let secret: string;
  beforeAll(async () => {
    site = await h.newSite('Verified');
    await allowOrigins(h, site.id);
    secret = (await h.runtime.services.access.setIdentity(site.id, { mode: 'optional' })).identitySecret!;
  });

  test('a verified user has the same visitor id on every device (no credential needed)', async () => {
    const userHash = identityHash(secret, 'customer-42');
    const phone = await getToken(h.app, site.id, { userId: 'customer-42', userHash });
    const laptop = await getToken(h.app, site.id, { userId: 'customer-42', userHash: userHash.toUpperCase() });
    expect(phone).toMatchObject({ visitorId: 'user:customer-42', verified: true, visitorCredential: null });
    expect(laptop.visitorId).toBe(phone.visitorId);
    const sent = await request(h.app).post(w(site.id, '/messages')).set(auth(phone.token)).send({ content: 'from my phone', clientMessageId: 'c-1' });
    expect(sent.status).toBe(201);
    const seen = await request(h.app).get(w(site.id, '/conversation')).set(auth(laptop.token));
    expect(seen.body.data.conversation.id).toBe(sent.body.data.conversation.id);
  });

  test('a bad hash, a hash for another user, or a user id without hash is refused', async () => {
    const wrong = identityHash('wis_not_the_secret', 'customer-42');
    for (const body of [
      { userId: 'customer-42', userHash: wrong },
      { userId: 'customer-43', userHash: identityHash(secret, 'customer-42') },
      { userId: 'customer-42' },
    ]) {
      const res = await request(h.app).post(w(site.id, '/token')).set('Origin', ORIGIN).send(body);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
  });

  test('optional mode lets anonymous visitors in; enforce refuses them, also with tokens issued before', async () => {
    const anonymous = await getToken(h.app, site.id);
    expect(anonymous.verified).toBe(false);
    const verified = await getToken(h.app, site.id, { userId: 'u1', userHash: identityHash(secret, 'u1') });
    await h.runtime.services.access.setIdentity(site.id, { mode: 'enforce' });
    try {
      const refused = await request(h.app).post(w(site.id, '/token')).set('Origin', ORIGIN).send({});
      expect(refused.status).toBe(401);
      expect(refused.body.error.message).toMatch(/verification/);
      const withCredential = await request(h.app).post(w(site.id, '/token')).set('Origin', ORIGIN).send({ visitorCredential: anonymous.visitorCredential });
      expect(withCredential.status).toBe(401);
      const old = await request(h.app).get(w(site.id, '/conversation')).set(auth(anonymous.token));
      expect(old.status).toBe(401);
      const ok = await request(h.app).get(w(site.id, '/conversation')).set(auth(verified.token));
      expect(ok.status).toBe(200);
    } finally {
      await h.runtime.services.access.setIdentity(site.id, { mode: 'optional' });
    }
  });

  test('a site without verification refuses identity fields rather than ignoring them', async () => {
    const res = await request(h.app)
      .post(w(h.site.id, '/token'))
      .set('Origin', ORIGIN)
      .send({ userId: 'u1', userHash: 'a'.repeat(64) });
    expect(res.status).toBe(400);
  });

  test('rotating the secret invalidates hashes made with the old one', async () => {
    const oldHash = identityHash(secret, 'u2');
    const rotated = (await h.runtime.services.access.setIdentity(site.id, { rotateSecret: true })).identitySecret!;
    expect(rotated).not.toBe(secret);
    const res = await request(h.app).post(w(site.id, '/token')).set('Origin', ORIGIN).send({ userId: 'u2', userHash: oldHash });
    expect(res.status).toBe(401);
    const ok = await getToken(h.app, site.id, { userId: 'u2', userHash: identityHash(rotated, 'u2') });
    expect(ok.visitorId).toBe('user:u2');
    secret = rotated;
  });
});

describe('CORS', () => {
  test('a preflight from an allowed origin is answered for Authorization, Content-Type and Last-Event-ID', async () => {
    const res = await request(h.app)
      .options(w(h.site.id, '/messages'))
      .set('Origin', ORIGIN)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization, content-type');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-allow-methods']).toMatch(/POST/);
    expect(res.headers['access-control-allow-headers']).toMatch(/Authorization/);
    expect(res.headers['access-control-allow-headers']).toMatch(/Last-Event-ID/);
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(res.headers.vary).toMatch(/Origin/);
  });

  test('a preflight from another origin gets no CORS headers', async () => {
    const res = await request(h.app).options(w(h.site.id, '/messages')).set('Origin', OTHER_ORIGIN).set('Access-Control-Request-Method', 'POST');
    expect(res.status).toBe(401);
    expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
  });

  test('answers and errors to an allowed origin carry CORS, so the window can read the envelope', async () => {
    const res = await request(h.app).get(conversation(h.site.id)).set('Origin', ORIGIN);
    expect(res.status).toBe(401);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-expose-headers']).toMatch(/Retry-After/);
  });

  test('the public API still sends no Access-Control-* header, preflight included, even for an allowed origin', async () => {
    const get = await request(h.app).get('/api/v1/conversations').set(bearer(h.site.key)).set('Origin', ORIGIN);
    expect(get.status).toBe(200);
    const pre = await request(h.app)
      .options('/api/v1/conversations')
      .set('Origin', ORIGIN)
      .set('Access-Control-Request-Method', 'GET')
      .set('Access-Control-Request-Headers', 'authorization');
    for (const res of [get, pre]) expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
  });
});

describe('rate limits', () => {
  let small: Harness;
  beforeAll(async () => {
    small = await createHarness({ limiter: createMemoryLimiter(3) });
    await allowOrigins(small, small.site.id);
  });
  afterAll(() => small?.close());

  test('per visitor for requests with a token, per client IP for the gateway and refused requests', async () => {
    const a = await getToken(small.app, small.site.id); // client IP: 1 of 3
    for (let i = 0; i < 3; i++) {
      const ok = await request(small.app).get(w(small.site.id, '/conversation')).set(auth(a.token));
      expect(ok.status).toBe(200);
      expect(ok.headers['x-ratelimit-limit']).toBe('3');
    }
    const limited = await request(small.app).get(w(small.site.id, '/conversation')).set(auth(a.token));
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limit_exceeded');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another visitor behind the same client IP has its own budget.
    const b = await getToken(small.app, small.site.id); // client IP: 2 of 3
    expect((await request(small.app).get(w(small.site.id, '/conversation')).set(auth(b.token))).status).toBe(200);
    // Tokens that are refused count against the client IP, like the gateway itself.
    expect((await request(small.app).get(w(small.site.id, '/conversation')).set(auth('wwt1.x.y'))).status).toBe(401); // 3 of 3
    const gateway = await request(small.app).post(w(small.site.id, '/token')).set('Origin', ORIGIN).send({});
    expect(gateway.status).toBe(429);
    expect(gateway.headers['access-control-allow-origin']).toBe(ORIGIN);
    // The public API's budget is its own.
    expect((await request(small.app).get('/api/v1/conversations').set(bearer(small.site.key))).status).toBe(200);
  });

  test('a flood from a disallowed origin gets 429 and, once over the limit, costs no database query', async () => {
    let queries = 0;
    const count = () => queries++;
    small.runtime.db.on('query', count);
    const statuses: number[] = [];
    try {
      for (let i = 0; i < 30; i++) {
        const req =
          i % 3 === 0
            ? request(small.app).post(w(small.site.id, '/token')).send({})
            : i % 3 === 1
              ? request(small.app).get(w(small.site.id, '/conversation'))
              : request(small.app).options(w(small.site.id, '/messages')).set('Access-Control-Request-Method', 'POST');
        const res = await req.set('Origin', OTHER_ORIGIN);
        statuses.push(res.status);
        expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
      }
    } finally {
      small.runtime.db.removeListener('query', count);
    }
    // The client IP may have spent part of its budget (3 a minute here) in the test before: each
    // request it still allowed is refused after one lookup, every later one is 429 before any.
    const refused = statuses.filter((s) => s === 401).length;
    expect(refused).toBeLessThanOrEqual(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(statuses.length - refused);
    expect(queries).toBeLessThanOrEqual(refused);
  });
});
