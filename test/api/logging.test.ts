import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { loggedApp } from '../helpers/test-app';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';
import { waitFor } from '../helpers/wait';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

test('access logs are JSON lines with the request id, and never carry keys, signatures or idempotency keys', async () => {
  const { app, lines: logged } = loggedApp(h.runtime.services, createMemoryLimiter(300));
  const m = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-log', 'file', {
    files: [{ buffer: Buffer.from('x'), originalName: 'x.txt', mimeType: 'text/plain' }],
  });
  const link = new URL(m.message.attachments[0].url);
  const signature = link.searchParams.get('signature')!;

  const ok = await request(app).get('/api/v1/conversations').set(bearer(h.site.key));
  await request(app).get(link.pathname + link.search);
  await request(app)
    .post(`/api/v1/conversations/${m.conversation.id}/messages`)
    .set(bearer(h.site.key))
    .set('Idempotency-Key', 'idem-secret-value')
    .send({ content: 'x' });
  await request(app).get('/api/v1/conversations').set('Authorization', 'Bearer wck_guessedKeyValue123');
  const failing = jest.spyOn(h.runtime.services.conversations, 'list').mockRejectedValueOnce(new Error('kaboom'));
  const crashed = await request(app).get('/api/v1/conversations').set(bearer(h.site.key));
  failing.mockRestore();
  // An access line is written when its answer has finished, which may be after the client read it.
  await waitFor('the access line of the last request', () =>
    logged().some((l) => l.includes(crashed.headers['x-request-id']) && l.includes('"statusCode":500')),
  );

  const lines = logged();
  const all = lines.join('\n');
  expect(lines.length).toBeGreaterThanOrEqual(5);
  for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
  expect(all).toContain(ok.headers['x-request-id']);
  // One access line per answer: the request (link signatures redacted) and its status.
  const access = lines.map((l) => JSON.parse(l)).filter((l) => l.req && l.res);
  expect(access.find((l) => l.req.id === ok.headers['x-request-id'])).toMatchObject({
    msg: 'request completed',
    req: { method: 'GET', url: '/api/v1/conversations' },
    res: { statusCode: 200 },
  });
  expect(access.find((l) => String(l.req.url).startsWith(link.pathname))?.req.url).toContain('signature=[redacted]');
  expect(access.find((l) => l.req.id === crashed.headers['x-request-id'])).toMatchObject({ level: 50, res: { statusCode: 500 } });
  for (const secret of [h.site.key, signature, 'idem-secret-value', 'wck_guessedKeyValue123']) expect(all).not.toContain(secret);
  // the unexpected error is logged with its request id (and the client saw neither)
  const errorLine = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'unexpected error');
  expect(errorLine.reqId).toBe(crashed.headers['x-request-id']);
  expect(errorLine.err.message).toBe('kaboom');
  expect(crashed.text).not.toContain('kaboom');
});

test('/readyz answers 503 when the database is gone', async () => {
  const gone = await createHarness();
  await gone.runtime.db.destroy();
  const res = await request(gone.app).get('/readyz');
  expect(res.status).toBe(503);
  expect(res.body.error.code).toBe('service_unavailable');
  expect((await request(gone.app).get('/healthz')).status).toBe(200);
  await gone.database.drop();
});
