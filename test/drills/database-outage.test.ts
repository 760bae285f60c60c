import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_DB } from '../helpers/db';
import { waitFor } from '../helpers/wait';
import { call, mariadbAvailable, PrivateMariadb, Service, startPrivateMariadb, startService } from './process';
import { seedSite, Seeded } from './seed';
import { Sample, startTraffic } from './traffic';

/**
 * Drill: the database fails under traffic. The service (`npm start`, a real process) runs on a
 * private MariaDB that the test kills (the server is gone: connections refused and cut) and
 * stops with SIGSTOP (the server hangs: TCP still accepts, nothing answers). Reads and replies
 * answer 503 service_unavailable with Retry-After within a few seconds, never 500 or a hang;
 * /readyz says 503 at once and /healthz 200; when the server returns, the service recovers by
 * itself. The figures are printed for docs/operations.md.
 */

/**
 * The bounds below are set by the service's own timers, not by the machine's speed: an answer during
 * an outage comes by the stall check (2 s) and its probe (1.5 s + 1.5 s) at the latest, where a hang
 * would reach the client's 15 s time-out; /readyz by its own 2 s time-out, before the 3 s connect one;
 * recovery by the probe every second (liveness).
 */
const MAX_ANSWER_MS = 6000;
/** Once the database answers again, requests succeed within this. */
const MAX_RECOVERY_MS = 10_000;
const OUTAGE_MS = 8000;

const drill = TEST_DB === 'mysql' && mariadbAvailable() ? describe : describe.skip;
if (TEST_DB !== 'mysql') {
  test.skip('needs TEST_DB=mysql: the drill kills and stops a private MariaDB server (mariadbd)', () => {});
}

drill('database outage under traffic (private MariaDB)', () => {
  let mariadb: PrivateMariadb | undefined;
  let service: Service | undefined;
  let dataDir: string;
  let seeded: Seeded;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    mariadb = await startPrivateMariadb();
    await mariadb.createDatabase('chat');
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'drill-outage-'));
    const env = { DATA_DIR: dataDir, DATABASE_URL: mariadb.url('chat') };
    seeded = await seedSite(env);
    service = await startService({ ...env, RATE_LIMIT_PER_MINUTE: '100000' });
  }, 90_000);

  afterAll(async () => {
    await service?.kill('SIGKILL');
    await mariadb?.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    // One line for the figures in docs/operations.md.
    process.stdout.write(`database outage figures: ${JSON.stringify(figures)}\n`);
  }, 30_000);

  /** Traffic before, during and after a fault; returns what the clients saw. */
  async function outage(name: string, fail: () => Promise<void> | void, heal: () => Promise<void> | void) {
    const conversation = seeded.conversationIds[0];
    const traffic = startTraffic(service!, seeded.key, conversation);
    try {
      await waitFor('traffic to flow', () => traffic.samples.filter((s) => s.status === 200 || s.status === 201).length >= 20, 20_000);
      const failedAt = Date.now();
      await fail();
      // An outage of several seconds: more than one round of detection, pooled connections included.
      await waitFor(
        '503s during the outage',
        () => Date.now() - failedAt >= OUTAGE_MS && traffic.samples.filter((s) => s.start >= failedAt && s.status === 503).length >= 8,
        30_000,
      );

      const ready = await call(service!, 'GET', '/readyz', { timeoutMs: 10_000 });
      const health = await call(service!, 'GET', '/healthz', { timeoutMs: 10_000 });

      const healingAt = Date.now();
      await heal();
      const healedAt = Date.now();
      await waitFor(
        'a read and a reply to succeed again',
        () => {
          const after = traffic.samples.filter((s) => s.start >= healedAt);
          return after.some((s) => s.kind === 'read' && s.status === 200) && after.some((s) => s.kind === 'write' && s.status === 201);
        },
        MAX_RECOVERY_MS + 5000,
      );
      const recoveredAt = Math.min(...traffic.samples.filter((s) => s.start >= healedAt && s.status === 200).map((s) => s.end));
      await traffic.stop();
      const readyAgain = await call(service!, 'GET', '/readyz', { timeoutMs: 10_000 });

      const during = traffic.samples.filter((s) => s.start >= failedAt && s.end <= healingAt);
      const failures = during.filter((s) => s.status === 503);
      const first503 = Math.min(...failures.map((s) => s.end));
      figures[name] = {
        requestsDuringOutage: during.length,
        answered503: failures.length,
        firstAnswer503AfterFaultMs: first503 - failedAt,
        slowestAnswerDuringOutageMs: Math.max(...during.map((s) => s.end - s.start)),
        readyzMs: ready.ms,
        databaseRestartMs: healedAt - healingAt,
        recoveredAfterDatabaseBackMs: recoveredAt - healedAt,
      };
      return { during, failures, ready, health, readyAgain, recoveredAfterMs: recoveredAt - healedAt, all: traffic.samples };
    } finally {
      await traffic.stop();
    }
  }

  function expectCleanOutage(r: Awaited<ReturnType<typeof outage>>) {
    const unexpected = r.during.filter((s: Sample) => ![200, 201, 503].includes(s.status));
    // Never a 500, a dropped connection (status 0) or a hang (the client's bound gives status 0 too).
    expect(unexpected).toEqual([]);
    for (const s of r.failures) {
      expect(s.code).toBe('service_unavailable');
      expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // Reads and writes both fail fast, not just one of them.
    expect(new Set(r.failures.map((s) => s.kind))).toEqual(new Set(['read', 'write']));
    expect(Math.max(...r.during.map((s) => s.end - s.start))).toBeLessThan(MAX_ANSWER_MS);
    expect(r.ready.status).toBe(503);
    expect(r.ready.json?.error?.code).toBe('service_unavailable');
    expect(r.ready.ms).toBeLessThan(3000);
    expect(r.health.status).toBe(200);
    expect(r.recoveredAfterMs).toBeLessThan(MAX_RECOVERY_MS);
    expect(r.readyAgain.status).toBe(200);
    expect(service!.child.exitCode).toBeNull();
  }

  test('MariaDB killed and restarted: 503 with Retry-After at once, recovery without a restart', async () => {
    const r = await outage(
      'killed',
      () => mariadb!.kill(),
      () => mariadb!.start(),
    );
    expectCleanOutage(r);
  }, 60_000);

  test('MariaDB hung (SIGSTOP) and resumed: 503 within seconds instead of a hang, recovery by itself', async () => {
    const r = await outage(
      'hung',
      () => mariadb!.pause(),
      () => mariadb!.resume(),
    );
    expectCleanOutage(r);
    // The service never logs a stack trace or a 500 for these.
    expect(service!.output()).not.toMatch(/"statusCode":500/);
  }, 60_000);
});
