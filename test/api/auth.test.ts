import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { sha256Hex } from '../../server/platform/crypto';

let h: Harness;
let convId: string;

beforeAll(async () => {
  h = await createHarness();
  convId = (await h.visitorSay(h.site.id, 'v-auth', 'hello')).conversation.id;
});
afterAll(() => h.close());

const get = (path: string) => request(h.app).get(`/api/v1${path}`);

describe('401 unauthorized', () => {
  test.each([
    ['no header', undefined],
    ['not bearer', 'Basic dXNlcjpwYXNz'],
    ['empty bearer', 'Bearer '],
    ['wrong key', 'Bearer wck_thisKeyDoesNotExist0000000000000000000'],
    ['no prefix', `Bearer ${'x'.repeat(47)}`],
  ])('%s', async (_name, header) => {
    const r = get('/conversations');
    const res = header ? await r.set('Authorization', header) : await r;
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
    // The challenge of RFC 6750: which scheme to use, and whether the credential sent was refused.
    expect(res.headers['www-authenticate']).toBe(header ? 'Bearer error="invalid_token"' : 'Bearer');
  });

  test('a media link with a bad signature gets the challenge too', async () => {
    const res = await get(`/media/med_00000000000000000000000000?expires=1&signature=${'a'.repeat(64)}`);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });

  test('a revoked key fails on the very next request', async () => {
    const k = await h.newKey(h.site.id, ['conversations:read']);
    expect((await get('/conversations').set(bearer(k.key))).status).toBe(200);
    const revoked = await h.runtime.services.access.revokeKey(k.id);
    expect(revoked.revokedAt).toMatch(/Z$/);
    const res = await get('/conversations').set(bearer(k.key));
    expect(res.status).toBe(401);
    // the record stays, with its revokedAt mark
    const listed = await h.runtime.services.access.listKeys(h.site.id);
    expect(listed.find((x) => x.id === k.id)?.revokedAt).toBe(revoked.revokedAt);
  });

  test('lastUsedAt is set by a request and then written at most once a minute', async () => {
    const k = await h.newKey(h.site.id, ['conversations:read']);
    const before = (await h.runtime.services.access.listKeys(h.site.id)).find((x) => x.id === k.id);
    expect(before?.lastUsedAt).toBeNull();
    await get('/conversations').set(bearer(k.key));
    const first = (await h.runtime.services.access.listKeys(h.site.id)).find((x) => x.id === k.id)?.lastUsedAt;
    expect(first).toMatch(/Z$/);
    await new Promise((r) => setTimeout(r, 5));
    await get('/conversations').set(bearer(k.key));
    expect((await h.runtime.services.access.listKeys(h.site.id)).find((x) => x.id === k.id)?.lastUsedAt).toBe(first);
  });

  test('only the fingerprint of a key is stored', async () => {
    const k = await h.newKey(h.site.id, ['conversations:read']);
    expect(k.key).toMatch(/^wck_[0-9A-Za-z]{43,}$/);
    const row = await h.runtime.db('api_keys').where({ id: k.id }).first();
    expect(row.fingerprint).toBe(sha256Hex(k.key));
    expect(JSON.stringify(row)).not.toContain(k.key);
  });
});

describe('403 insufficient_scope, per right', () => {
  const cases: [string, 'get' | 'post', string, string][] = [
    ['conversations:read', 'get', '/conversations', 'media:read'],
    ['conversations:read', 'get', '/conversations/{c}', 'conversations:write'],
    ['conversations:read', 'get', '/conversations/{c}/messages', 'media:read'],
    ['conversations:write', 'post', '/conversations/{c}/messages', 'conversations:read'],
    ['conversations:write', 'post', '/conversations/{c}/close', 'conversations:read'],
    ['media:read', 'get', '/media/{m}', 'conversations:read'],
  ];
  let mediaId: string;
  beforeAll(async () => {
    const m = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-scope', 'file', {
      files: [{ buffer: Buffer.from('abc'), originalName: 'a.txt', mimeType: 'text/plain' }],
    });
    mediaId = m.message.attachments[0].id;
  });
  test.each(cases)('%s is needed for %s %s', async (right, method, path, otherRight) => {
    const url = `/api/v1${path.replace('{c}', convId).replace('{m}', mediaId)}`;
    const without = await h.newKey(h.site.id, [otherRight as never]);
    const denied = await request(h.app)
      [method](url)
      .set(bearer(without.key))
      .send(method === 'post' && path.endsWith('messages') ? { content: 'x' } : undefined);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('insufficient_scope');
    expect(denied.body.error.message).toContain(right);
    const withRight = await h.newKey(h.site.id, [right as never]);
    const allowed = await request(h.app)
      [method](url)
      .set(bearer(withRight.key))
      .send(method === 'post' && path.endsWith('messages') ? { content: 'x' } : undefined);
    expect(allowed.status).toBeLessThan(300);
  });
});

describe('sites are isolated: another site sees 404, indistinguishable from a missing id', () => {
  let other: { id: string; key: string };
  let mediaId: string;
  beforeAll(async () => {
    other = await h.newSite('Other');
    const m = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-iso', 'file', {
      files: [{ buffer: Buffer.from('abc'), originalName: 'a.txt', mimeType: 'text/plain' }],
    });
    mediaId = m.message.attachments[0].id;
  });
  const missingConv = 'conv_00000000000000000000000000';
  test.each<['get' | 'post', string]>([
    ['get', '/conversations/{c}'],
    ['get', '/conversations/{c}/messages'],
    ['post', '/conversations/{c}/messages'],
    ['post', '/conversations/{c}/close'],
    ['get', '/media/{m}'],
  ])('%s %s', async (method, path) => {
    const send = (id: string, mid: string) =>
      request(h.app)
        [method](`/api/v1${path.replace('{c}', id).replace('{m}', mid)}`)
        .set(bearer(other.key))
        .send(method === 'post' && path.endsWith('messages') ? { content: 'x' } : undefined);
    const foreign = await send(convId, mediaId);
    const missing = await send(missingConv, 'med_00000000000000000000000000');
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual(missing.body);
    expect(foreign.body.error.code).toBe('not_found');
  });
  test("the list shows only the key's site", async () => {
    await h.visitorSay(other.id, 'v-other', 'mine');
    const res = await get('/conversations?limit=100').set(bearer(other.key));
    expect(res.body.data).toHaveLength(1);
    expect(res.body.data[0].visitorId).toBe('v-other');
  });
  test('a foreign conversation is not closed or answered by the other key', async () => {
    const convId = (await h.visitorSay(h.site.id, 'v-iso-2', 'hello')).conversation.id;
    await request(h.app).post(`/api/v1/conversations/${convId}/close`).set(bearer(other.key));
    await request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(other.key)).send({ content: 'intrusion' });
    const card = await get(`/conversations/${convId}`).set(bearer(h.site.key));
    expect(card.body.data.state).toBe('open');
    const msgs = await get(`/conversations/${convId}/messages`).set(bearer(h.site.key));
    expect(msgs.body.data.map((m: { content: string }) => m.content)).not.toContain('intrusion');
  });
});

describe('headers', () => {
  test('every answer carries the security headers and a request id, and never CORS', async () => {
    for (const res of [
      await get('/conversations').set(bearer(h.site.key)),
      await get('/conversations'),
      await get('/nowhere').set(bearer(h.site.key)),
      await request(h.app).get('/healthz'),
      await get('/conversations').set(bearer(h.site.key)).set('Origin', 'https://evil.example'),
    ]) {
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['strict-transport-security']).toMatch(/max-age=\d+/);
      expect(res.headers['x-request-id']).toMatch(/^req_/);
      expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
    }
  });

  test('a CORS preflight gets no Access-Control header', async () => {
    const res = await request(h.app)
      .options('/api/v1/conversations')
      .set('Origin', 'https://evil.example')
      .set('Access-Control-Request-Method', 'GET')
      .set('Access-Control-Request-Headers', 'authorization');
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
    expect(res.body.error.code).toBe('method_not_allowed');
    expect(res.headers.allow).toContain('GET');
  });

  test('a harmless client request id is echoed, a hostile one replaced', async () => {
    const kept = await get('/conversations').set(bearer(h.site.key)).set('X-Request-Id', 'trace-123');
    expect(kept.headers['x-request-id']).toBe('trace-123');
    const replaced = await get('/conversations').set(bearer(h.site.key)).set('X-Request-Id', 'a\tb"{}');
    expect(replaced.headers['x-request-id']).toMatch(/^req_/);
  });

  test('authenticated answers carry the rate-limit headers', async () => {
    const res = await get('/conversations').set(bearer(h.site.key));
    expect(Number(res.headers['x-ratelimit-limit'])).toBe(300);
    expect(Number(res.headers['x-ratelimit-remaining'])).toBeLessThan(300);
    expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(1);
  });

  test('unknown paths and wrong methods answer in the envelope', async () => {
    const unknown = await get('/nope').set(bearer(h.site.key));
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    const outside = await request(h.app).get('/wp-admin');
    expect(outside.status).toBe(404);
    expect(outside.body.error.code).toBe('not_found');
    const wrong = await request(h.app).delete(`/api/v1/conversations/${convId}`).set(bearer(h.site.key));
    expect(wrong.status).toBe(405);
    expect(wrong.body.error.code).toBe('method_not_allowed');
    expect(wrong.headers.allow).toBe('GET');
  });

  test('health and readiness', async () => {
    expect((await request(h.app).get('/healthz')).body).toEqual({ data: { status: 'ok' } });
    expect((await request(h.app).get('/readyz')).body).toEqual({ data: { status: 'ready', checks: { database: 'ok', migrations: 'ok' } } });
  });
});
