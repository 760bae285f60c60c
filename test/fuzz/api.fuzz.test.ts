import fs from 'node:fs';
import path from 'node:path';
import { createHarness, Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { loadOperations } from './operations';
import { requestArb } from './requests';
import { publicExpectations } from './checks';
import { fuzzSettings, runFuzz } from './runner';
import { startFuzzServer, FuzzServer } from './wire';
import { publicDomain, seedWorld, World } from './world';
import { leftAfterCleanUp } from '../helpers/wait';

/**
 * Property-based fuzzing of every operation of openapi/openapi.yaml against the real app behind a
 * real HTTPS listener (issue 7). Each case is one request, generated from the document's schemas
 * and then broken on purpose (types, fields, JSON and multipart bytes, encodings, sizes, methods,
 * paths, headers, other sites' ids, cut-off uploads). For every case: an answer arrives (or, for a
 * deliberately cut upload, the server lets the connection go), never a 5xx, every 4xx is the
 * envelope with a decided error code and its status, nothing of site B reaches site A, and the
 * process raises no uncaught exception.
 *
 * The settings (FUZZ_RUNS, FUZZ_SEED and FUZZ_PATH for a replay, ...) are in runner.ts; the
 * management API's fuzz is manage.fuzz.test.ts.
 */
const SETTINGS = fuzzSettings(10_000);
const MAX_FILE_BYTES = 48 * 1024;

let h: Harness;
let server: FuzzServer;
let world: World;
const uncaught: unknown[] = [];

beforeAll(async () => {
  h = await createHarness({
    // Generous limits so 429 does not hide what is behind it; small files so "too large" is cheap.
    env: { RATE_LIMIT_PER_MINUTE: '100000000', MAX_ATTACHMENT_BYTES: String(MAX_FILE_BYTES) },
  });
  server = await startFuzzServer(h.app);
  world = await seedWorld(h, server);
  // An exception no handler catches would end a real server process: catch it here and fail the
  // case that caused it (jest would otherwise report it without the request).
  process.setUncaughtExceptionCaptureCallback((err) => uncaught.push(err));
}, 60_000);

afterAll(async () => {
  process.setUncaughtExceptionCaptureCallback(null);
  await server?.close();
  await h?.close();
});

test(
  `${SETTINGS.runs} generated requests over every operation: no 5xx, no dropped connection, the envelope, no other site's data (${TEST_DB})`,
  async () => {
    const { operations, basePath } = loadOperations();
    expect(operations.length).toBeGreaterThanOrEqual(7);
    await runFuzz({
      file: 'test/fuzz/api.fuzz.test.ts',
      settings: SETTINGS,
      cases: requestArb(operations, publicDomain(world), basePath, { maxFileBytes: MAX_FILE_BYTES }),
      server,
      expectations: publicExpectations(world),
      uncaught,
      mustSucceed: operations,
    });
  },
  Math.max(180_000, SETTINGS.runs * 30),
);

test('afterwards the service still answers, site B is untouched and no upload is left in the spool', async () => {
  expect(uncaught).toEqual([]);
  const health = await server.get('/healthz');
  expect(health.status).toBe(200);
  const list = await server.get('/api/v1/conversations?limit=5', { Authorization: `Bearer ${world.keys.full}` });
  expect(list.status).toBe(200);
  expect(JSON.parse(list.body.toString()).data.length).toBeGreaterThan(0);
  const messages = await server.get(`/api/v1/conversations/${world.a.replyConversations[0]}/messages?limit=1`, { Authorization: `Bearer ${world.keys.full}` });
  expect(messages.status).toBe(200);

  const bConversations = [...world.b.replyConversations, ...world.b.closableConversations, ...world.b.closedConversations];
  const bMessages = await h.runtime.db('messages').whereIn('conversation_id', bConversations).count({ n: '*' }).first();
  expect(Number(bMessages?.n)).toBe(world.b.messageIds.length);
  const bOpen = await h.runtime.db('conversations').whereIn('id', bConversations).where('state', 'open').count({ n: '*' }).first();
  expect(Number(bOpen?.n)).toBe(world.b.replyConversations.length + world.b.closableConversations.length);

  // Spool files are removed when each answer (or dropped connection) is done; allow that to finish.
  const spool = path.join(h.config.dataDir, 'tmp');
  const leftovers = () => (fs.existsSync(spool) ? fs.readdirSync(spool) : []);
  expect(await leftAfterCleanUp(leftovers)).toEqual([]);
});
