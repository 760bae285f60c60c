import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { createHarness, Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { loadOperations } from './operations';
import { requestArb, describeCase, FuzzCase } from './requests';
import { problemsWith, describeOutcome } from './checks';
import { startFuzzServer, FuzzServer } from './wire';
import { seedWorld, World } from './world';

/**
 * Property-based fuzzing of every operation of openapi/openapi.yaml against the real app behind a
 * real HTTPS listener (issue 7). Each case is one request, generated from the document's schemas
 * and then broken on purpose (types, fields, JSON and multipart bytes, encodings, sizes, methods,
 * paths, headers, other sites' ids, cut-off uploads). For every case: an answer arrives (or, for a
 * deliberately cut upload, the server lets the connection go), never a 5xx, every 4xx is the
 * envelope with a decided error code and its status, nothing of site B reaches site A, and the
 * process raises no uncaught exception.
 *
 *   FUZZ_RUNS=100000 npx jest --runInBand test/fuzz      more cases (npm run fuzz)
 *   FUZZ_SEED=<seed> FUZZ_PATH=<path> npx jest ...        replay the failure a run printed
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const SEED = process.env.FUZZ_SEED === undefined ? Date.now() ^ (Math.random() * 0x100000000) : Number(process.env.FUZZ_SEED);
const PATH = process.env.FUZZ_PATH || undefined;
/**
 * Independent streams of cases run side by side (seeds SEED, SEED+1, ...): the app meets
 * concurrent traffic, and the wait of one request on the database is another's turn. A replay
 * (FUZZ_PATH) runs the one stream it names.
 */
const STREAMS = PATH ? 1 : Math.max(1, Number(process.env.FUZZ_CONCURRENCY ?? 4));
const MAX_FILE_BYTES = 48 * 1024;
/** Exploration: record every distinct failure and go on, instead of stopping at the first. */
const KEEP_GOING = process.env.FUZZ_KEEP_GOING === '1';

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
  `${RUNS} generated requests over every operation: no 5xx, no dropped connection, the envelope, no other site's data (${TEST_DB})`,
  async () => {
    const { operations, basePath } = loadOperations();
    expect(operations.length).toBeGreaterThanOrEqual(7);
    const statuses = new Map<string, Map<number | string, number>>();
    /** Per operation: how often each status (or outcome) came back, and `ms`, the summed latency. */
    const count = (op: string, key: number | string, by = 1) => {
      const m = statuses.get(op) ?? new Map();
      m.set(key, (m.get(key) ?? 0) + by);
      statuses.set(op, m);
    };

    const distinct = new Map<string, string>();
    const property = fc.asyncProperty(requestArb(operations, world, basePath, { maxFileBytes: MAX_FILE_BYTES }), async (c: FuzzCase) => {
      const before = uncaught.length;
      const outcome = await server.send(c);
      const problems = problemsWith(c, outcome, world);
      for (const err of uncaught.slice(before)) {
        const where = STREAMS > 1 ? ` (raised while this request or one of ${STREAMS - 1} others was in flight)` : '';
        problems.push(`uncaught exception, which would end the process${where}: ${(err as Error)?.stack?.split('\n').slice(0, 4).join(' | ') ?? String(err)}`);
      }
      count(c.operationId, outcome.kind === 'answer' ? outcome.answer.status : outcome.kind);
      count(c.operationId, 'ms', outcome.ms);
      if (!problems.length) return;
      const report = `${problems.join('\n')}\nanswer: ${describeOutcome(outcome)}`;
      if (!KEEP_GOING) throw new Error(report);
      const kind = `${c.operationId}: ${problems[0].replace(/req_\w+|\d+ ms/g, '')}`;
      if (!distinct.has(kind)) distinct.set(kind, `${describeCase(c)}\n${report}`);
    });

    const started = performance.now();
    const perStream = Math.ceil(RUNS / STREAMS);
    // allSettled: a stream that breaks must not leave the others running after the test ends.
    const settled = await Promise.allSettled(
      Array.from({ length: STREAMS }, (_, i) => fc.check(property, { numRuns: perStream, seed: (SEED + i) | 0, path: PATH, endOnFailure: false })),
    );
    const broken = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (broken) throw broken.reason;
    const runs = settled.map((r) => (r as PromiseFulfilledResult<fc.RunDetails<[FuzzCase]>>).value);
    const seconds = (performance.now() - started) / 1000;
    const total = runs.reduce((n, d) => n + d.numRuns, 0);
    const summary = [...statuses].map(([op, m]) => `${op} ${JSON.stringify(Object.fromEntries(m))}`).join('\n  ');
    process.stdout.write(
      `fuzz (${TEST_DB}): ${total} cases in ${seconds.toFixed(1)} s (${Math.round(total / seconds)}/s), ${STREAMS} stream(s), seeds ${runs.map((d) => d.seed).join(', ')}\n  ${summary}\n`,
    );
    const failures = runs
      .filter((d) => d.failed)
      .map((d) => {
        const counterexample = d.counterexample ? describeCase(d.counterexample[0]) : '(none)';
        return (
          `Fuzz failure. Replay: FUZZ_SEED=${d.seed} FUZZ_PATH=${d.counterexamplePath} TEST_DB=${TEST_DB} npx jest --runInBand test/fuzz\n\n` +
          `Request:\n${counterexample}\n\n${d.errorInstance instanceof Error ? d.errorInstance.message : String(d.errorInstance)}\n\n` +
          `(${d.numShrinks} shrinks; fast-check: seed ${d.seed}, path "${d.counterexamplePath}"` +
          `${STREAMS > 1 ? `; found with ${STREAMS} streams side by side, the replay runs this one alone` : ''})`
        );
      });
    if (distinct.size || failures.length) {
      throw new Error([...(distinct.size ? [`${distinct.size} kinds of failure:`] : []), ...distinct.values(), ...failures].join('\n\n'));
    }

    // The generators must reach the handlers, not only the validator: every operation got a success.
    if (!PATH && RUNS >= 2000) {
      for (const op of operations) {
        const got = [...(statuses.get(op.operationId) ?? new Map()).keys()].filter((s) => typeof s === 'number' && s >= 200 && s < 300);
        expect({ operation: op.operationId, successes: got.length > 0 }).toEqual({ operation: op.operationId, successes: true });
      }
    }
  },
  Math.max(180_000, RUNS * 30),
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
  for (let i = 0; i < 40 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 50));
  expect(leftovers()).toEqual([]);
});
