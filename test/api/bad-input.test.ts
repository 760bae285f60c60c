import request from 'supertest';
import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from '../helpers/wait';
import { createHarness, Harness, bearer } from '../helpers/harness';

let h: Harness;
let convId: string;
beforeAll(async () => {
  h = await createHarness();
  convId = (await h.visitorSay(h.site.id, 'v-bad', 'hi')).conversation.id;
});
afterAll(() => h.close());

const post = (body: string | object, type = 'application/json') =>
  request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).set('Content-Type', type).send(body);

function expectEnvelope(res: request.Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe('string');
  expect(res.text).not.toMatch(/<html|at Object\.|node_modules|\.ts:\d+/);
}

test.each([
  ['malformed JSON', '{"content": "x"'],
  ['JSON null', 'null'],
  ['JSON array', '[{"content":"x"}]'],
  ['JSON string', '"hello"'],
  ['content a number', { content: 42 }],
  ['content an object', { content: { $gt: '' } }],
  ['content null', { content: null }],
  ['missing content', { format: 'plain' }],
  ['unknown field', { content: 'x', admin: true }],
  ['prototype pollution', '{"content":"x","__proto__":{"polluted":true}}'],
  ['bad format', { content: 'x', format: 'html' }],
])('%s is 400 invalid_request with details', async (_name, body) => {
  const before = await h.runtime.db('messages').count({ n: '*' }).first();
  const res = await post(typeof body === 'string' ? body : JSON.stringify(body));
  expectEnvelope(res, 400, 'invalid_request');
  expect(Array.isArray(res.body.error.details)).toBe(true);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(await h.runtime.db('messages').count({ n: '*' }).first()).toEqual(before);
});

test('invalid UTF-8 in the body is 400, not silently replaced', async () => {
  const bytes = Buffer.concat([Buffer.from('{"content":"caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
  const res = await request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).set('Content-Type', 'application/json').send(bytes);
  expectEnvelope(res, 400, 'invalid_request');
});

test('a body over 64 KiB is 413', async () => {
  const res = await post(JSON.stringify({ content: 'x'.repeat(66 * 1024) }));
  expectEnvelope(res, 413, 'payload_too_large');
});

test('a body that is neither JSON nor multipart is 415', async () => {
  expectEnvelope(await post('content=hello', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
  expectEnvelope(await post('<content>x</content>', 'application/xml'), 415, 'unsupported_media_type');
});

test('a JSON body in another charset is 415', async () => {
  const res = await post(JSON.stringify({ content: 'x' }), 'application/json; charset=utf-16');
  expect([415, 400]).toContain(res.status);
  expect(res.body.error).toBeDefined();
});

test('a truncated multipart body is 400', async () => {
  const res = await request(h.app)
    .post(`/api/v1/conversations/${convId}/messages`)
    .set(bearer(h.site.key))
    .set('Content-Type', 'multipart/form-data; boundary=XYZ')
    .send('--XYZ\r\nContent-Disposition: form-data; name="content"\r\n\r\nhello');
  expectEnvelope(res, 400, 'invalid_request');
});

test('multipart without a boundary is 400', async () => {
  const res = await request(h.app)
    .post(`/api/v1/conversations/${convId}/messages`)
    .set(bearer(h.site.key))
    .set('Content-Type', 'multipart/form-data')
    .send('x');
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('invalid_request');
});

test.each(["conv_' OR '1'='1", 'conv_1;DROP TABLE messages', '../../etc/passwd', '%00', 'conv_%E0%A4%A', 'CONV_01M82B2GBADEBBWM8EWPR7H6H9'])(
  'hostile path id %p is 4xx in the envelope',
  async (id) => {
    const res = await request(h.app)
      .get(`/api/v1/conversations/${encodeURI(id).replace(/'/g, '%27')}`)
      .set(bearer(h.site.key));
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(res.body.error).toBeDefined();
  },
);

test('SQL-looking content is stored and returned verbatim, and changes nothing else', async () => {
  const evil = '\'); DROP TABLE messages; -- " OR 1=1 /* ${jndi:ldap://x} <script>alert(1)</script>';
  const res = await post({ content: evil });
  expect(res.status).toBe(201);
  expect(res.body.data.content).toBe(evil);
  const list = await request(h.app).get(`/api/v1/conversations/${convId}/messages?order=desc&limit=1`).set(bearer(h.site.key));
  expect(list.body.data[0].content).toBe(evil);
  expect(await h.runtime.db.schema.hasTable('messages')).toBe(true);
});

test('SQL-looking and oversized query values are 400', async () => {
  for (const q of ["state=open' OR 1=1 --", 'limit=1;DROP', `cursor=${'x'.repeat(2000)}`, 'limit=10&limit=20', 'order[]=asc']) {
    const res = await request(h.app).get(`/api/v1/conversations/${convId}/messages?${q}`).set(bearer(h.site.key));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  }
});

test('a huge header or a very long URL does not crash the service', async () => {
  const res = await request(h.app)
    .get(`/api/v1/conversations?x=${'a'.repeat(8000)}`)
    .set(bearer(h.site.key));
  expect(res.status).toBe(400);
  const key = await request(h.app)
    .get('/api/v1/conversations')
    .set('Authorization', `Bearer wck_${'a'.repeat(5000)}`);
  expect(key.status).toBe(401);
});

test.each(['%', '%FF%FE', '%E0%80%AF', '%zz', '%C3%28'])('a path segment that is not valid percent-encoding (%s) is 400, not 500', async (segment) => {
  const res = await request(h.app).get(`/api/v1/conversations/${segment}/messages`).set(bearer(h.site.key));
  expectEnvelope(res, 400, 'invalid_request');
});

test.each([
  ['br', '/api/v1/schemas', 'get'],
  ['deflate', `/api/v1/conversations/CONV/close`, 'post'],
  ['gzip', `/api/v1/conversations/CONV/messages`, 'post'],
])('a body that does not decode with its Content-Encoding (%s) is 400, not 500', async (encoding, url, method) => {
  const res = await (request(h.app) as unknown as Record<string, (u: string) => request.Test>)
    [method](url.replace('CONV', convId))
    .set(bearer(h.site.key))
    .set('Content-Type', 'application/json')
    .set('Content-Encoding', encoding)
    .send('{"content":"not compressed"}');
  expectEnvelope(res, 400, 'invalid_request');
});

test('Content-Type parameters are accepted and do not change the answer', async () => {
  for (let i = 0; i < 5; i++) {
    const res = await post(JSON.stringify({ content: `param ${i}` }), `application/json; x=${i}-${Date.now()}`);
    expect(res.status).toBe(201);
  }
});

test('a malformed part header between file parts answers 400 at once, and nothing stays in the spool', async () => {
  // busboy reports the bad header but goes on and hands out the next file part, which then never ends
  // (found by the fuzz: the request hung until the client gave up).
  const B = 'fz';
  const body = Buffer.from(
    `--${B}\r\nContent-Disposition: form-data; name="content"\r\n\r\nhello\r\n` +
      `--${B}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n${'a'.repeat(500)}\r\n` +
      `--${B}\r\nContent-Disposition: form-data; name="file"; filename="/\u0000\u00ff"\r\nContent-Type: text/plain\r\n\r\nbbbb\r\n` +
      `--${B}\r\nContent-Disposition: form-data; name="file"; filename="c.png"\r\nContent-Type: */*\r\n\r\n${','.repeat(500)}\r\n`,
    'latin1',
  );
  // The client's time-out is the liveness check: a request that hangs fails here instead of answering.
  const res = await request(h.app)
    .post(`/api/v1/conversations/${convId}/messages`)
    .set(bearer(h.site.key))
    .set('Content-Type', `multipart/form-data; boundary=${B}`)
    .timeout(10_000)
    .send(body);
  expectEnvelope(res, 400, 'invalid_request');
  const spool = path.join(h.config.dataDir, 'tmp');
  await waitFor('the spool to empty', () => fs.readdirSync(spool).length === 0, 5000);
});

test.each(['1e309', '-1e309', 'Infinity', '-Infinity'])('limit=%s (a number no database can bind) is a 400 on every list, never a 500', async (value) => {
  for (const path of [`/api/v1/conversations/${convId}/messages`, '/api/v1/conversations']) {
    const res = await request(h.app)
      .get(`${path}?limit=${encodeURIComponent(value)}`)
      .set(bearer(h.site.key));
    expectEnvelope(res, 400, 'invalid_request');
    expect(res.body.error.details).toEqual([{ path: '/query/limit', message: expect.any(String) }]);
  }
});
