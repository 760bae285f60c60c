import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';

let h: Harness;
let now = Date.now();
let media: { id: string; url: string; size: number };
const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);

beforeAll(async () => {
  h = await createHarness({ now: () => now });
  const m = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-media', 'photo', {
    files: [{ buffer: bytes, originalName: 'Ünïcode "photo".png', mimeType: 'image/png' }],
  });
  media = m.message.attachments[0];
});
afterAll(() => h.close());

const binary = (r: request.Test) =>
  r.buffer(true).parse((res, cb) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  });

test('download with media:read streams the file with its headers', async () => {
  const res = await binary(request(h.app).get(`/api/v1/media/${media.id}`).set(bearer(h.site.key)));
  expect(res.status).toBe(200);
  expect(Buffer.compare(res.body, bytes)).toBe(0);
  expect(res.headers['content-type']).toBe('image/png');
  expect(res.headers['content-length']).toBe(String(bytes.length));
  expect(res.headers['content-disposition']).toMatch(/^attachment; filename="[^"]+"; filename\*=UTF-8''/);
  expect(res.headers['content-disposition']).not.toMatch(/filename="[^"]*"[^;]*"/);
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers.etag).toMatch(/^"[0-9a-f]{64}"$/);
});

test('If-None-Match with the ETag answers 304 without a body', async () => {
  const first = await request(h.app).get(`/api/v1/media/${media.id}`).set(bearer(h.site.key));
  const second = await request(h.app).get(`/api/v1/media/${media.id}`).set(bearer(h.site.key)).set('If-None-Match', first.headers.etag);
  expect(second.status).toBe(304);
  expect(second.text ?? '').toBe('');
});

test('the signed link opens without a key until it expires', async () => {
  const link = new URL(media.url);
  expect(link.origin).toBe('https://localhost:8443');
  expect(Number(link.searchParams.get('expires'))).toBe(Math.floor(now / 1000) + 3600);
  const res = await binary(request(h.app).get(link.pathname + link.search));
  expect(res.status).toBe(200);
  expect(Buffer.compare(res.body, bytes)).toBe(0);
  now += 3601_000;
  try {
    const expired = await request(h.app).get(link.pathname + link.search);
    expect(expired.status).toBe(401);
    expect(expired.body.error.code).toBe('unauthorized');
  } finally {
    now -= 3601_000;
  }
});

test('a tampered or borrowed signature is 401', async () => {
  const link = new URL(media.url);
  const other = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-media-2', 'other', {
    files: [{ buffer: Buffer.from('secret'), originalName: 's.txt', mimeType: 'text/plain' }],
  });
  // the signature of one file does not open another
  const borrowed = `/api/v1/media/${other.message.attachments[0].id}${link.search}`;
  expect((await request(h.app).get(borrowed)).status).toBe(401);
  const flipped = link.searchParams.get('signature')!.replace(/^./, (c) => (c === 'a' ? 'b' : 'a'));
  expect((await request(h.app).get(`${link.pathname}?expires=${link.searchParams.get('expires')}&signature=${flipped}`)).status).toBe(401);
  expect((await request(h.app).get(`${link.pathname}?signature=${link.searchParams.get('signature')}`)).status).toBe(401);
});

test('without a key or a signature, media is 401', async () => {
  const res = await request(h.app).get(`/api/v1/media/${media.id}`);
  expect(res.status).toBe(401);
});

test('an attachment of another site is 404 like a missing one, and its link opens only itself', async () => {
  const other = await h.newSite('Other');
  const res = await request(h.app).get(`/api/v1/media/${media.id}`).set(bearer(other.key));
  expect(res.status).toBe(404);
  const missing = await request(h.app).get('/api/v1/media/med_00000000000000000000000000').set(bearer(other.key));
  expect(missing.body).toEqual(res.body);
});

test('an active type is served as a download, sandboxed', async () => {
  const m = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-html', 'page', {
    files: [{ buffer: Buffer.from('<script>alert(1)</script>'), originalName: 'x.html', mimeType: 'text/html' }],
  });
  const res = await request(h.app).get(`/api/v1/media/${m.message.attachments[0].id}`).set(bearer(h.site.key));
  expect(res.headers['content-disposition']).toMatch(/^attachment/);
  expect(res.headers['content-security-policy']).toContain('sandbox');
  expect(res.headers['x-content-type-options']).toBe('nosniff');
});

test('HEAD answers like GET without a body, on media and on conversations', async () => {
  const res = await request(h.app).head(`/api/v1/media/${media.id}`).set(bearer(h.site.key));
  expect(res.status).toBe(200);
  expect(res.headers['content-length']).toBe(String(bytes.length));
  expect(res.headers.etag).toMatch(/^"/);
  expect(res.text ?? '').toBe('');
  const conv = (await request(h.app).get('/api/v1/conversations?limit=1').set(bearer(h.site.key))).body.data[0];
  const head = await request(h.app).head(`/api/v1/conversations/${conv.id}`).set(bearer(h.site.key));
  expect(head.status).toBe(200);
  expect(head.text ?? '').toBe('');
  expect((await request(h.app).head(`/api/v1/conversations/${conv.id}`)).status).toBe(401);
});

test('a long file name is cut to 200 characters without splitting an emoji', async () => {
  const { safeFileName } = await import('../../server/media/service');
  const name = safeFileName('x'.repeat(199) + '😀😀.png');
  expect(Array.from(name)).toHaveLength(200);
  expect(name.endsWith('😀')).toBe(true);
  expect(name).not.toMatch(/\uFFFD|[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
});
