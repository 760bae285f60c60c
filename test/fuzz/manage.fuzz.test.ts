import { createHarness, Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { TEST_HASHER } from '../manage/helpers';
import { deliveryEnv, Receiver, startReceiver } from '../webhooks/helpers';
import { loadOperations, MANAGE_DOCUMENT_FILE } from './operations';
import { requestArb } from './requests';
import { fuzzSettings, runFuzz } from './runner';
import { startFuzzServer, FuzzServer } from './wire';
import { isOwnerOnly, manageDomain, manageExpectations, ManageWorld, seedManageWorld } from './manage-world';

/**
 * Property-based fuzzing of every operation of openapi/manage.yaml (issue 18), with the public
 * fuzz's generators, mutations and wire client (api.fuzz.test.ts; settings in runner.ts). Cases
 * speak as site A's owner and agent, by management token or by session cookie (with and without
 * `Sec-Fetch-Site: same-origin`), mixed with site B's ids. For every case, beyond the public
 * fuzz's checks (an answer, no 5xx, the envelope with a decided code, no uncaught exception): a
 * request that reaches an operation gets a status the document lists for it with a body its
 * schema accepts; a change without a token that does not prove the service's origin is
 * `403 cross_site_request`; an agent never succeeds on an owner-only operation; B's objects are
 * 404 to A's members and nothing of B reaches an answer.
 *
 * Fewer cases than the public fuzz by default (`npm test` runs it on both engines; FUZZ_RUNS for more).
 */
const SETTINGS = fuzzSettings(1_000);
const MAX_FILE_BYTES = 48 * 1024;

let h: Harness;
let server: FuzzServer;
let receiver: Receiver;
let world: ManageWorld;
const uncaught: unknown[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  h = await createHarness({
    passwordHasher: TEST_HASHER,
    // Generous limits so 429 does not hide what is behind it; small files so "too large" is cheap.
    env: { ...deliveryEnv(receiver), RATE_LIMIT_PER_MINUTE: '100000000', MAX_ATTACHMENT_BYTES: String(MAX_FILE_BYTES) },
  });
  server = await startFuzzServer(h.app);
  world = await seedManageWorld(h, server, receiver);
  process.setUncaughtExceptionCaptureCallback((err) => uncaught.push(err));
}, 120_000);

afterAll(async () => {
  process.setUncaughtExceptionCaptureCallback(null);
  await server?.close();
  await h?.close();
  await receiver?.close();
});

test(
  `${SETTINGS.runs} generated requests over every management operation: no 5xx, the document's statuses and schemas, roles, cross-site, no other site's data (${TEST_DB})`,
  async () => {
    const { operations, basePath } = loadOperations(MANAGE_DOCUMENT_FILE);
    expect(basePath).toBe('/manage/v1');
    expect(operations.length).toBeGreaterThanOrEqual(45);
    expect(operations.filter(isOwnerOnly).length).toBeGreaterThanOrEqual(20);
    await runFuzz({
      file: 'test/fuzz/manage.fuzz.test.ts',
      settings: SETTINGS,
      cases: requestArb(operations, manageDomain(world), basePath, { maxFileBytes: MAX_FILE_BYTES }),
      server,
      expectations: manageExpectations(world, operations, basePath),
      uncaught,
      mustSucceed: operations,
    });
  },
  Math.max(180_000, SETTINGS.runs * 60),
);

test("afterwards the service still answers and site B's members, keys and conversations are as they were", async () => {
  expect(uncaught).toEqual([]);
  const me = await server.get('/manage/v1/me', { Authorization: `Bearer ${world.creds.owner.token}` });
  expect(me.status).toBe(200);
  const db = h.runtime.db;
  const b = world.b;
  const members = await db('memberships').where({ site_id: b.siteId }).count({ n: '*' }).first();
  expect(Number(members?.n)).toBe(b.memberIds.length);
  const revoked = await db('api_keys').whereIn('id', b.keyIds).whereNotNull('revoked_at').count({ n: '*' }).first();
  expect(Number(revoked?.n)).toBe(0);
  const open = await db('conversations')
    .whereIn('id', [...b.replyConversations, ...b.closableConversations])
    .where('state', 'open')
    .count({ n: '*' })
    .first();
  expect(Number(open?.n)).toBe(b.replyConversations.length + b.closableConversations.length);
  const bAssigned = await db('conversations').where({ site_id: b.siteId }).whereNotNull('assignee_id').count({ n: '*' }).first();
  expect(Number(bAssigned?.n)).toBe(0);
  const bTokens = await db('management_tokens').whereIn('id', b.tokenIds).whereNotNull('revoked_at').count({ n: '*' }).first();
  expect(Number(bTokens?.n)).toBe(0);
});
