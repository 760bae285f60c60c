import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import type { ServerResponse } from 'node:http';
import type { Harness } from '../helpers/harness';
import { answer, attemptsOf, deliveryEnv, deliveryHarness, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks } from './helpers';

/**
 * The outbox survives a worker that dies mid-delivery: `npm run worker` as a real child process,
 * killed with SIGKILL while its attempts hang; a second worker retries them once the leases run
 * out, and every event arrives.
 */
const ROOT = path.resolve(__dirname, '../..');
/** The workers' delivery settings (lease = time-out + 10 s). */
const SETUP = { timeoutMs: 2000, delaysMs: [200, 200] };

let receiver: Receiver;
let h: Harness;
const children: ChildProcess[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, SETUP);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await h.close();
  await receiver.close();
});

/** The worker exactly as `npm run worker` starts it (tsx), one process, so the kill hits the worker itself. */
function startWorker() {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/webhooks/worker-main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: h.database.dataDir,
      ...(h.database.databaseUrl ? { DATABASE_URL: h.database.databaseUrl } : {}),
      ...deliveryEnv(receiver, SETUP),
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => output };
}

test('a worker killed with SIGKILL mid-delivery loses nothing: another worker delivers every event', async () => {
  const site = await h.newSite('crash');
  const { secret } = await webhooks(h).setEndpoint(site.id, receiver.url('/crash'), 'message.created');
  const held: ServerResponse[] = [];
  receiver.on('/crash', (_req, res) => void held.push(res)); // hangs: the attempts are in flight
  for (let i = 0; i < 6; i++) await h.visitorSay(site.id, `visitor-${i}`, `message ${i}`);
  const ids = await eventIdsOf(h, site.id, 'message.created');
  expect(ids).toHaveLength(6);

  const first = startWorker();
  await waitFor('the first worker to have attempts in flight', () => receiver.at('/crash').length >= 4, 30_000);
  const inFlight = new Set(receiver.at('/crash').map((r) => r.json.id));
  first.child.kill('SIGKILL');
  expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
  for (const id of ids) expect((await deliveryOf(h, id)).status).toBe('pending');

  receiver.on('/crash', answer(200, 'got it'));
  const second = startWorker();
  await waitFor(
    'every event delivered',
    async () => {
      const rows = await h.runtime.db('deliveries').whereIn('event_id', ids).select('status');
      return rows.every((r) => r.status === 'delivered');
    },
    45_000,
  );

  // Every event reached the receiver with a 200 and a valid signature.
  const accepted = receiver.at('/crash').slice(inFlight.size);
  expect(new Set(accepted.map((r) => r.json.id))).toEqual(new Set(ids));
  for (const id of ids) {
    const log = await attemptsOf(h, id);
    if (inFlight.has(id)) {
      // The killed attempt is in the log as interrupted; the retry continues the numbering.
      expect(log.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
        [1, null, 'interrupted: the worker stopped during the attempt'],
        [2, 200, null],
      ]);
      expect(accepted.find((r) => r.json.id === id)!.headers['x-service-attempt']).toBe('2');
    } else {
      expect(log.map((a) => [a.attempt, a.status_code])).toEqual([[1, 200]]);
    }
  }

  // SIGTERM: the worker stops cleanly.
  second.child.kill('SIGTERM');
  expect(await second.exited).toEqual({ code: 0, signal: null });
  expect(second.output()).toContain('delivery worker stopped');
  // Neither worker wrote the signing secret to its log.
  for (const w of [first, second]) expect(w.output()).not.toContain(secret!.slice('whsec_'.length));
}, 90_000);
