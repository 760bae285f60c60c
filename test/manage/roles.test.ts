import fs from 'node:fs';
import fc from 'fast-check';
import request from 'supertest';
import YAML from 'yaml';
import { TEST_DB } from '../helpers/db';
import { loadOperations, MANAGE_DOCUMENT_FILE, Operation, Schema } from '../fuzz/operations';
import { valid } from '../fuzz/schema-arbitraries';
import { credentialFreeMatcher, crossSiteMatcher, OPERATION_ROLES } from '../../server/manage/roles';
import { M, manageHarness, memberWithToken, newAccount, signIn, newToken } from './helpers';
import type { Harness } from '../helpers/harness';

/**
 * Roles are declared where scopes are: every operation of openapi/manage.yaml names its role in
 * `x-role`, and the entry enforces it in one step (server/manage/roles.ts). Driven from the
 * document: a new operation without a role, or an owner's operation an agent gets through, fails here.
 */

const raw = fs.readFileSync(MANAGE_DOCUMENT_FILE, 'utf8');
const document = YAML.parse(raw) as { paths: Record<string, Record<string, { operationId: string; 'x-role'?: unknown }>> };
const { operations } = loadOperations(MANAGE_DOCUMENT_FILE);
const roleOf = (op: Operation) => document.paths[op.template][op.method.toLowerCase()]['x-role'];

test('every operation declares exactly one valid x-role, and nothing else does', () => {
  expect(operations.length).toBeGreaterThanOrEqual(58);
  const missing = operations.filter((op) => !(OPERATION_ROLES as readonly unknown[]).includes(roleOf(op))).map((op) => op.operationId);
  expect(missing).toEqual([]);
  // YAML refuses a repeated key, so one per operation: the document has no other.
  expect(raw.match(/^\s+x-role:/gm)).toHaveLength(operations.length);
});

test('site operations (member, owner) are exactly those under /sites/{siteId}; owners only exactly those the prose says', () => {
  const bySite = operations.filter((op) => op.template.startsWith('/sites/{siteId}')).map((op) => op.operationId);
  expect(operations.filter((op) => ['member', 'owner'].includes(roleOf(op) as string)).map((op) => op.operationId)).toEqual(bySite);
  const saidOwners = operations.filter((op) => /^Owners only\b/.test(op.description)).map((op) => op.operationId);
  expect(operations.filter((op) => roleOf(op) === 'owner').map((op) => op.operationId)).toEqual(saidOwners);
});

test('the entry lets through without a credential exactly the x-role public operations', () => {
  const isCredentialFree = credentialFreeMatcher(document as never);
  const publicOnes = operations.filter((op) => roleOf(op) === 'public').map((op) => op.operationId);
  expect(publicOnes.sort()).toEqual([
    'acceptInvitation',
    'completeEmailLink',
    'completePasswordReset',
    'completeSetup',
    'getSession',
    'requestPasswordReset',
    'showUnsubscribe',
    'signIn',
    'unsubscribe',
  ]);
  for (const op of operations) {
    const path = op.template.replace(/\{[^}]+\}/g, 'x');
    expect([op.operationId, isCredentialFree({ method: op.method, path })]).toEqual([op.operationId, roleOf(op) === 'public']);
  }
  // A path no operation has is not credential-free (so it is 401 without a credential, as before).
  expect(isCredentialFree({ method: 'POST', path: '/session/extra' })).toBe(false);
  expect(isCredentialFree({ method: 'PUT', path: '/session' })).toBe(false);
});

test('only the operations marked x-cross-site skip the cross-site check, and the mark is refused off a public operation', () => {
  const isCrossSite = crossSiteMatcher(document as never);
  expect(operations.filter((op) => op.crossSite).map((op) => op.operationId)).toEqual(['unsubscribe']);
  for (const op of operations) {
    const path = op.template.replace(/\{[^}]+\}/g, 'x');
    expect([op.operationId, isCrossSite({ method: op.method, path })]).toEqual([op.operationId, op.crossSite]);
  }
  // The GET of the same path (the confirm page) is not marked: only what the document marks passes.
  expect(isCrossSite({ method: 'GET', path: '/unsubscribe/x' })).toBe(false);
  const marked = (role: string) => ({ paths: { '/x': { post: { operationId: 'x', 'x-role': role, 'x-cross-site': true } } } });
  expect(() => crossSiteMatcher(marked('account') as never)).toThrow('POST /x: x-cross-site must be true, on a public operation');
  expect(crossSiteMatcher(marked('public') as never)({ method: 'POST', path: '/x' })).toBe(true);
});

describe(`over HTTP (${TEST_DB})`, () => {
  let h: Harness;
  let agent: { token: string };
  let stranger: { token: string };

  beforeAll(async () => {
    h = await manageHarness({ env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
    agent = await memberWithToken(h, h.site.id, 'agent@example.com', 'agent');
    // A member of another site only: site A does not exist for it.
    const other = await h.newSite();
    stranger = await memberWithToken(h, other.id, 'stranger@example.com', 'owner');
    await newAccount(h, 'nobody@example.com');
  }, 60_000);
  afterAll(() => h?.close());

  /** `https://shop.example/` for every `format: uri` (the generators know no URI syntax), the rest as generated. */
  const withUris = (schema: unknown): unknown => {
    if (Array.isArray(schema)) return schema.map(withUris);
    if (!schema || typeof schema !== 'object') return schema;
    if ((schema as Schema).format === 'uri') return { const: 'https://shop.example/' };
    return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, withUris(v)]));
  };
  const sample = (schema: Schema, seed: number) => fc.sample(valid(withUris(schema) as Schema), { numRuns: 1, seed })[0];

  /** A request the document accepts for `op` on site A: ids, required query and body generated from their schemas. */
  function validRequest(op: Operation, who: { token: string }, seed = 1) {
    const path = op.template.replace(/\{([^}]+)\}/g, (_, name: string) =>
      name === 'siteId' ? h.site.id : encodeURIComponent(String(sample(op.params.find((p) => p.name === name)!.schema, seed))),
    );
    const query = Object.fromEntries(op.params.filter((p) => p.in === 'query' && p.required).map((p) => [p.name, String(sample(p.schema, seed))]));
    const r = request(h.app)[op.method.toLowerCase() as 'get'](`${M}${path}`).query(query).set('Authorization', `Bearer ${who.token}`);
    const body = op.bodies['application/json'];
    return body ? r.send(sample(body, seed) as object) : r;
  }

  /**
   * The answer to the first generated request the validator accepts: a schema with `oneOf` or
   * unique items is not always met by a generated value, and a 400 says nothing about roles.
   */
  async function answerTo(op: Operation, who: { token: string }) {
    let res = await validRequest(op, who);
    for (let seed = 2; seed <= 30 && res.status === 400 && res.body?.error?.code === 'invalid_request'; seed++) res = await validRequest(op, who, seed);
    return res;
  }

  const owners = operations.filter((op) => roleOf(op) === 'owner');
  const siteOperations = operations.filter((op) => ['member', 'owner'].includes(roleOf(op) as string));

  test('an agent of the site gets 403 forbidden on every owner operation', async () => {
    const answers: string[] = [];
    for (const op of owners) {
      const res = await answerTo(op, agent);
      answers.push(`${op.operationId} ${res.status} ${res.body?.error?.code}`);
    }
    expect(answers).toEqual(owners.map((op) => `${op.operationId} 403 forbidden`));
  }, 300_000);

  test('an account that is no member of the site gets 404 not_found on every member and owner operation', async () => {
    const answers: string[] = [];
    for (const op of siteOperations) {
      const res = await answerTo(op, stranger);
      answers.push(`${op.operationId} ${res.status} ${res.body?.error?.code} ${res.body?.error?.message}`);
    }
    expect(answers).toEqual(siteOperations.map((op) => `${op.operationId} 404 not_found Site not found.`));
  }, 300_000);

  test('without a credential, every operation but the public ones is refused with 401', async () => {
    const answers: string[] = [];
    for (const op of operations) {
      const res = await validRequest(op, { token: '' }).unset('Authorization').set('Sec-Fetch-Site', 'same-origin');
      // The entry's refusal for want of a credential (a public operation's own 401, a wrong password, is another).
      const refused = res.status === 401 && res.body.error.message === 'Sign in (session cookie) or send Authorization: Bearer wcm_...';
      answers.push(`${op.operationId} ${refused ? 'closed' : 'open'}`);
    }
    expect(answers).toEqual(operations.map((op) => `${op.operationId} ${roleOf(op) === 'public' ? 'open' : 'closed'}`));
  }, 300_000);

  test('an account operation needs no site: an account without one gets through', async () => {
    const nobody = await newToken(h, (await signIn(h, 'nobody@example.com')).cookie);
    const me = await request(h.app).get(`${M}/me`).set('Authorization', `Bearer ${nobody.token}`);
    expect([me.status, me.body.data.sites]).toEqual([200, []]);
  });
});
