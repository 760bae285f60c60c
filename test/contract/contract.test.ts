/**
 * Contract: every operation of the document, every status it documents, provoked for real and
 * checked against the document (the app validates responses itself too). A final test fails when
 * the document gains an operation or status that has no scenario here.
 */
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { startS3rver } from '../helpers/s3';
import { documentedOperations, assertMatchesDocument } from '../helpers/openapi';

let h: Harness; // the main app
let limited: Harness; // RATE_LIMIT_PER_MINUTE=1
let broken: Harness; // its database has gone away
let bucketed: Harness | undefined; // MEDIA_STORE=s3 on s3rver, downloads by redirect (made by its scenario)
let s3: Awaited<ReturnType<typeof startS3rver>> | undefined;
let convId: string;
let closedId: string;
let mediaId: string;
let mediaUrl: string;
let other: { id: string; key: string };
let readOnlyKey: string;
let noRightsKey: string;

type Res = request.Response;
type Scenario = () => Promise<Res>;

const api = (app: Harness['app']) => request(app);

beforeAll(async () => {
  h = await createHarness();
  limited = await createHarness({ env: { RATE_LIMIT_PER_MINUTE: '1' } });
  broken = await createHarness();
  const first = await h.visitorSay(h.site.id, 'v-contract', 'hello');
  convId = first.conversation.id;
  const withFile = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-file', 'see file', {
    files: [{ buffer: Buffer.from('%PDF-1.4 test'), originalName: 'invoice.pdf', mimeType: 'application/pdf' }],
  });
  mediaId = withFile.message.attachments[0].id;
  mediaUrl = withFile.message.attachments[0].url;
  const toClose = await h.visitorSay(h.site.id, 'v-closed', 'bye');
  closedId = toClose.conversation.id;
  await h.runtime.services.conversations.close(h.site.id, closedId);
  other = await h.newSite('Other');
  readOnlyKey = (await h.newKey(h.site.id, ['conversations:read'])).key;
  noRightsKey = (await h.newKey(h.site.id, ['media:read'])).key;
  await broken.runtime.db.destroy();
});

afterAll(async () => {
  await h.close();
  await limited.close();
  await broken.database.drop();
  await bucketed?.close();
  await s3?.close();
});

/** Sends a request to one of the apps, given how to build it. */
function call(app: Harness['app'], method: 'get' | 'post', path: string, key: string | null, body?: object) {
  let r = api(app)[method](`/api/v1${path}`);
  if (key) r = r.set(bearer(key));
  if (body) r = r.send(body);
  return r;
}

async function exhausted(method: 'get' | 'post', path: (id: string) => string, body?: object): Promise<Res> {
  const site = await limited.newSite();
  const conv = await limited.visitorSay(site.id, 'v', 'x');
  const target = path(conv.conversation.id);
  await call(limited.app, method, target, site.key, body);
  return call(limited.app, method, target, site.key, body);
}

/** A service method throwing something unexpected while `send` runs: the answer must be the 500 envelope, nothing internal. */
function failing<T extends object>(
  target: () => T,
  method: keyof T,
  send: () => request.Test = () => call(h.app, 'get', '/conversations', h.site.key),
): Scenario {
  return async () => {
    const spy = jest.spyOn(target(), method as never).mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

const services = () => h.runtime.services;

const scenarios: Record<string, Record<string, Scenario>> = {
  listConversations: {
    200: () => call(h.app, 'get', '/conversations?limit=2', h.site.key),
    400: () => call(h.app, 'get', '/conversations?limit=0', h.site.key),
    401: () => call(h.app, 'get', '/conversations', null),
    403: () => call(h.app, 'get', '/conversations', noRightsKey),
    429: () => exhausted('get', () => '/conversations'),
    500: failing(() => services().conversations, 'list'),
    503: () => call(broken.app, 'get', '/conversations', broken.site.key),
  },
  getConversation: {
    200: () => call(h.app, 'get', `/conversations/${convId}`, h.site.key),
    400: () => call(h.app, 'get', '/conversations/not-an-id', h.site.key),
    401: () => call(h.app, 'get', `/conversations/${convId}`, 'wck_wrong'),
    403: () => call(h.app, 'get', `/conversations/${convId}`, noRightsKey),
    404: () => call(h.app, 'get', `/conversations/${convId}`, other.key),
    429: () => exhausted('get', (id) => `/conversations/${id}`),
    500: failing(
      () => services().conversations,
      'get',
      () => call(h.app, 'get', `/conversations/${convId}`, h.site.key),
    ),
    503: () => call(broken.app, 'get', `/conversations/${convId}`, broken.site.key),
  },
  listMessages: {
    200: () => call(h.app, 'get', `/conversations/${convId}/messages`, h.site.key),
    400: () => call(h.app, 'get', `/conversations/${convId}/messages?order=sideways`, h.site.key),
    401: () => call(h.app, 'get', `/conversations/${convId}/messages`, null),
    403: () => call(h.app, 'get', `/conversations/${convId}/messages`, noRightsKey),
    404: () => call(h.app, 'get', `/conversations/${convId}/messages`, other.key),
    429: () => exhausted('get', (id) => `/conversations/${id}/messages`),
    500: failing(
      () => services().messages,
      'list',
      () => call(h.app, 'get', `/conversations/${convId}/messages`, h.site.key),
    ),
    503: () => call(broken.app, 'get', `/conversations/${convId}/messages`, broken.site.key),
  },
  createReply: {
    201: () => call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 'Hello from the contract test' }),
    400: () => call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 42 }),
    401: () => call(h.app, 'post', `/conversations/${convId}/messages`, null, { content: 'x' }),
    403: () => call(h.app, 'post', `/conversations/${convId}/messages`, readOnlyKey, { content: 'x' }),
    404: () => call(h.app, 'post', `/conversations/${convId}/messages`, other.key, { content: 'x' }),
    409: () => call(h.app, 'post', `/conversations/${closedId}/messages`, h.site.key, { content: 'x' }),
    413: () => call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 'x'.repeat(70 * 1024) }),
    415: () => api(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).set('Content-Type', 'text/plain').send('hello'),
    422: async () => {
      const key = `contract-${Date.now()}`;
      await call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 'first' }).set('Idempotency-Key', key);
      return call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 'second' }).set('Idempotency-Key', key);
    },
    429: () => exhausted('post', (id) => `/conversations/${id}/messages`, { content: 'x' }),
    500: failing(
      () => services().messages,
      'reply',
      () => call(h.app, 'post', `/conversations/${convId}/messages`, h.site.key, { content: 'x' }),
    ),
    503: () => call(broken.app, 'post', `/conversations/${convId}/messages`, broken.site.key, { content: 'x' }),
    507: async () => {
      // The disk fills up while the reply's file is stored.
      const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28 });
      const spy = jest.spyOn(services().media, 'persist').mockRejectedValue(full);
      try {
        return await api(h.app)
          .post(`/api/v1/conversations/${convId}/messages`)
          .set(bearer(h.site.key))
          .field('content', 'with a file')
          .attach('file', Buffer.from('%PDF-1.4'), { filename: 'a.pdf', contentType: 'application/pdf' });
      } finally {
        spy.mockRestore();
      }
    },
  },
  closeConversation: {
    200: async () => {
      const c = await h.visitorSay(h.site.id, 'v-close-200', 'hi');
      return call(h.app, 'post', `/conversations/${c.conversation.id}/close`, h.site.key);
    },
    400: () => call(h.app, 'post', '/conversations/conv_%27%20OR%201%3D1/close', h.site.key),
    401: () => call(h.app, 'post', `/conversations/${convId}/close`, null),
    403: () => call(h.app, 'post', `/conversations/${convId}/close`, readOnlyKey),
    404: () => call(h.app, 'post', `/conversations/${convId}/close`, other.key),
    429: () => exhausted('post', (id) => `/conversations/${id}/close`),
    500: failing(
      () => services().conversations,
      'close',
      () => call(h.app, 'post', `/conversations/${convId}/close`, h.site.key),
    ),
    503: () => call(broken.app, 'post', `/conversations/${convId}/close`, broken.site.key),
  },
  downloadMedia: {
    200: () => call(h.app, 'get', `/media/${mediaId}`, h.site.key),
    302: async () => {
      s3 = await startS3rver('contract-media');
      bucketed = await createHarness({
        env: { MEDIA_STORE: 's3', MEDIA_S3_BUCKET: 'contract-media', MEDIA_S3_ENDPOINT: s3.url, MEDIA_S3_FORCE_PATH_STYLE: 'true' },
      });
      const m = await bucketed.runtime.services.window.chat.visitorSay(bucketed.site.id, 'v', 'f', {
        files: [{ buffer: Buffer.from('x'), originalName: 'x.txt', mimeType: 'text/plain' }],
      });
      return call(bucketed.app, 'get', `/media/${m.message.attachments[0].id}`, bucketed.site.key);
    },
    304: async () => {
      const first = await call(h.app, 'get', `/media/${mediaId}`, h.site.key);
      return call(h.app, 'get', `/media/${mediaId}`, h.site.key).set('If-None-Match', first.headers.etag);
    },
    400: () => call(h.app, 'get', '/media/med_nope', h.site.key),
    401: () => {
      const tampered = new URL(mediaUrl);
      tampered.searchParams.set('expires', String(Number(tampered.searchParams.get('expires')) + 1));
      return api(h.app).get(tampered.pathname + tampered.search);
    },
    403: () => call(h.app, 'get', `/media/${mediaId}`, readOnlyKey),
    404: () => call(h.app, 'get', `/media/${mediaId}`, other.key),
    429: async () => {
      const site = await limited.newSite();
      const m = await limited.runtime.services.window.chat.visitorSay(site.id, 'v', 'f', {
        files: [{ buffer: Buffer.from('x'), originalName: 'x.txt', mimeType: 'text/plain' }],
      });
      const id = m.message.attachments[0].id;
      await call(limited.app, 'get', `/media/${id}`, site.key);
      return call(limited.app, 'get', `/media/${id}`, site.key);
    },
    500: failing(
      () => services().media,
      'open',
      () => call(h.app, 'get', `/media/${mediaId}`, h.site.key),
    ),
    503: () => call(broken.app, 'get', `/media/${mediaId}`, broken.site.key),
  },
  listEventSchemas: {
    200: () => call(h.app, 'get', '/schemas', null),
    400: () => call(h.app, 'get', '/schemas?page=2', null),
    429: async () => {
      await call(limited.app, 'get', '/schemas', null);
      return call(limited.app, 'get', '/schemas', null);
    },
    // The per-client-IP limiter is the one dependency of the keyless operations.
    500: failing(
      () => h.limiter,
      'hit',
      () => call(h.app, 'get', '/schemas', null),
    ),
  },
  getEventSchema: {
    200: () => call(h.app, 'get', '/schemas/message.created.json', null),
    400: () => call(h.app, 'get', '/schemas/secrets.json', null),
    429: async () => {
      // keyless requests share one budget per client IP (1 a minute on this app)
      await call(limited.app, 'get', '/schemas/message.created.json', null);
      return call(limited.app, 'get', '/schemas/message.created.json', null);
    },
    500: failing(
      () => h.limiter,
      'hit',
      () => call(h.app, 'get', '/schemas/message.created.json', null),
    ),
  },
};

const pairs = documentedOperations().flatMap((op) => op.statuses.map((status) => [op.operationId, status] as const));

describe.each(pairs)('%s answers %s', (operationId, status) => {
  test('as the document says', async () => {
    const scenario = scenarios[operationId]?.[status];
    expect(scenario).toBeDefined();
    const res = await scenario!();
    expect(res.status).toBe(Number(status));
    assertMatchesDocument(operationId, res as never);
    if (res.status >= 400) {
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.stringify(res.body)).not.toMatch(/boom|secret internal|at .*\.ts:/);
    }
  });
});

test('every documented operation and status has a scenario, and no scenario is stale', () => {
  const documented = new Set(pairs.map(([op, status]) => `${op} ${status}`));
  const covered = new Set(Object.entries(scenarios).flatMap(([op, byStatus]) => Object.keys(byStatus).map((s) => `${op} ${s}`)));
  expect([...documented].filter((p) => !covered.has(p))).toEqual([]);
  expect([...covered].filter((p) => !documented.has(p))).toEqual([]);
});

test('the 500 answer hides internals and names the request id', async () => {
  const res = await failing(() => services().conversations, 'list')();
  expect(res.status).toBe(500);
  expect(res.body.error.code).toBe('internal_error');
  expect(res.body.error.message).toContain(res.headers['x-request-id']);
});
