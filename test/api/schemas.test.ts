import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { createHarness, Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

test('every listed schema is served without a key, byte for byte the file the SDK ships, and compiles as 2020-12', async () => {
  const index = await request(h.app).get('/api/v1/schemas');
  expect(index.status).toBe(200);
  expect(index.body.data.map((d: { event: string }) => d.event).sort()).toEqual(['conversation.closed', 'conversation.started', 'message.created']);
  for (const { event, url } of index.body.data) {
    const res = await request(h.app)
      .get(url)
      .buffer(true)
      .parse((r, cb) => {
        let text = '';
        r.on('data', (c: Buffer) => (text += c));
        r.on('end', () => cb(null, text));
      });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/schema\+json/);
    expect(res.body).toBe(fs.readFileSync(path.resolve(__dirname, `../../sdk/schemas/${event}.json`), 'utf8'));
    const ajv = new Ajv2020({ strict: true, allErrors: true, strictTuples: false });
    ajv.addKeyword('x-api-version');
    addFormats(ajv);
    expect(typeof ajv.compile(JSON.parse(res.body))).toBe('function');
  }
});

test('an emitted payload validates against its served schema; a broken one does not', async () => {
  await h.visitorSay(h.site.id, 'v-schema', 'hello');
  const body = JSON.parse((await h.runtime.db('events').where({ name: 'conversation.started' }).first()).body);
  const schema = JSON.parse((await request(h.app).get('/api/v1/schemas/conversation.started.json')).text);
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  expect(validate(body)).toBe(true);
  expect(validate({ ...body, data: { ...body.data, message: null } })).toBe(false);
  expect(validate({ ...body, id: 'message.created:x' })).toBe(false);
});

test('no path escapes the schema directory', async () => {
  for (const p of ['/api/v1/schemas/..%2F..%2Fpackage.json', '/api/v1/schemas/%2e%2e%2fmaster.key', '/api/v1/schemas/secrets.json']) {
    const res = await request(h.app).get(p);
    expect([400, 404]).toContain(res.status);
    expect(res.body.error).toBeDefined();
  }
});
