/**
 * CORS is decided per router: only the chat window's entry sets Access-Control-* (for a site's
 * allowed origins). Nothing strips such headers afterwards, so this checks that no answer outside
 * the window carries one: every operation of the public API and every path's preflight, from an
 * origin the site allows for its window, plus the operational endpoints, the documents and a 404.
 */
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { openApiDocument } from '../../server/http/openapi-document';
import { allowOrigins, ORIGIN, w } from '../window/helpers';

let h: Harness;
let convId: string;

beforeAll(async () => {
  h = await createHarness();
  await allowOrigins(h, h.site.id);
  convId = (await h.visitorSay(h.site.id, 'v-cors', 'hello')).conversation.id;
});
afterAll(() => h.close());

const corsHeaders = (res: request.Response) => Object.keys(res.headers).filter((k) => k.startsWith('access-control-'));
const paths = Object.entries(openApiDocument().paths as Record<string, Record<string, unknown>>);

test('the chat window still answers its allowed origin with CORS (the check below is not vacuous)', async () => {
  const res = await request(h.app).options(w(h.site.id, '/messages')).set('Origin', ORIGIN).set('Access-Control-Request-Method', 'POST');
  expect(res.status).toBe(204);
  expect(corsHeaders(res)).toEqual(expect.arrayContaining(['access-control-allow-origin', 'access-control-allow-methods']));
});

test.each(
  paths.flatMap(([template, operations]) =>
    Object.keys(operations)
      .filter((m) => ['get', 'post', 'patch', 'put', 'delete'].includes(m))
      .map((method) => [method.toUpperCase(), template] as const),
  ),
)('no Access-Control-* header: %s %s, and its preflight', async (method, template) => {
  const url = `/api/v1${template.replace('{id}', convId).replace(/\{[^}]+\}/g, 'x')}`;
  const call = request(h.app)[method.toLowerCase() as 'get' | 'post'](url).set(bearer(h.site.key)).set('Origin', ORIGIN);
  const answer = method === 'GET' ? await call : await call.send({});
  const preflight = await request(h.app)
    .options(url)
    .set('Origin', ORIGIN)
    .set('Access-Control-Request-Method', method)
    .set('Access-Control-Request-Headers', 'authorization, content-type');
  for (const res of [answer, preflight]) expect({ status: res.status, cors: corsHeaders(res) }).toEqual({ status: res.status, cors: [] });
});

test.each(['/healthz', '/readyz', '/openapi.yaml', '/docs/', '/nope'])('no Access-Control-* header: GET %s', async (url) => {
  const res = await request(h.app).get(url).set('Origin', ORIGIN);
  expect(corsHeaders(res)).toEqual([]);
});
