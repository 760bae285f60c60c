import path from 'node:path';
import { execFile } from 'node:child_process';
import type { Harness } from '../helpers/harness';
import { answer, deliveryHarness, deliveryOf, eventIdsOf, Receiver, signatureValid, startReceiver, waitFor, workerPool } from './helpers';

/** The operator CLI's webhook commands, run as a user runs them (a separate process on the same database). */
const ROOT = path.resolve(__dirname, '../..');

let receiver: Receiver;
let h: Harness;
const workers = workerPool(() => h);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, { delaysMs: [50, 50], onEvents: () => workers.wake() });
});
afterEach(() => workers.stopAll());
afterAll(async () => {
  await h.close();
  await receiver.close();
});

function admin(args: string[], env: Record<string, string> = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'server/cli/admin.ts', ...args],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          DATA_DIR: h.database.dataDir,
          ...(h.database.databaseUrl ? { DATABASE_URL: h.database.databaseUrl } : {}),
          LOG_LEVEL: 'silent',
          ...env,
        },
      },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** With --json: exactly one JSON object on stdout, nothing else. */
function oneJson(stdout: string) {
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}

test('webhook roll-secret and switch-secret: the same roll as the management API, audited as the operator', async () => {
  const site = await h.newSite('cli-roll');
  await admin(['webhook', 'set', '--site', site.id, '--url', receiver.url('/cli-roll'), '--json']);
  const rolled = await admin(['webhook', 'roll-secret', '--site', site.id, '--switch-in-hours', '2', '--json']);
  expect(rolled.code).toBe(0);
  const roll = oneJson(rolled.stdout);
  expect(roll).toEqual({ id: expect.stringMatching(/^whk_/), secret: expect.stringMatching(/^whsec_/), switchAt: expect.any(String) });
  expect(Math.abs(Date.parse(roll.switchAt) - Date.now() - 2 * 3600_000)).toBeLessThan(60_000);
  expect((await h.runtime.services.webhooks.getEndpoint(site.id)).secretRoll).toEqual({ switchAt: roll.switchAt });

  const switched = await admin(['webhook', 'switch-secret', '--site', site.id, '--json']);
  expect(switched.code).toBe(0);
  expect(Date.parse(oneJson(switched.stdout).switchAt)).toBeLessThan(Date.parse(roll.switchAt));
  const again = await admin(['webhook', 'switch-secret', '--site', site.id, '--json']);
  expect(again.code).toBe(0); // still pending until the switch time: switching again keeps the earlier time
  const audit = await h.runtime.db('audit_log').where({ site_id: site.id }).orderBy('created_at').pluck('action');
  expect(audit).toEqual(expect.arrayContaining(['event_address.created', 'event_address.secret_roll_started', 'event_address.secret_switched']));
  expect(await h.runtime.db('audit_log').where({ site_id: site.id }).whereNotNull('actor_account_id').first()).toBeUndefined();
  const bad = await admin(['webhook', 'roll-secret', '--site', site.id, '--switch-in-hours', '1000', '--json']);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toMatch(/switchInHours must be 1 to 168/);
});

test('webhook set, rotate-secret, deliveries and redeliver', async () => {
  const site = await h.newSite('cli');
  const url = receiver.url('/cli');

  const set = await admin(['webhook', 'set', '--site', site.id, '--url', url, '--events', 'message.created,conversation.closed', '--json']);
  expect(set.code).toBe(0);
  const endpoint = oneJson(set.stdout);
  expect(endpoint).toEqual({
    id: expect.stringMatching(/^whk_/),
    url,
    events: ['message.created', 'conversation.closed'],
    secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{43}$/),
  });

  const rotated = await admin(['webhook', 'rotate-secret', '--site', site.id, '--json']);
  expect(rotated.code).toBe(0);
  const { id, secret } = oneJson(rotated.stdout);
  expect(id).toBe(endpoint.id);
  expect(secret).toMatch(/^whsec_/);
  expect(secret).not.toBe(endpoint.secret);

  // Two events fail (410), then show up in the log.
  receiver.on('/cli', answer(410, 'closed for now'));
  workers.start();
  await h.visitorSay(site.id, 'v1', 'one');
  await h.visitorSay(site.id, 'v2', 'two');
  const ids = await eventIdsOf(h, site.id, 'message.created');
  for (const e of ids) await waitFor('failed', async () => (await deliveryOf(h, e)).status === 'failed');

  const log = await admin(['webhook', 'deliveries', '--site', site.id, '--failed', '--json']);
  expect(log.code).toBe(0);
  const { deliveries } = oneJson(log.stdout);
  expect(deliveries.map((d: { eventId: string }) => d.eventId).sort()).toEqual([...ids].sort());
  expect(deliveries.find((d: { eventId: string }) => d.eventId === ids[1])).toEqual({
    eventId: ids[1],
    event: 'message.created',
    attempt: 1,
    url,
    startedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    durationMs: expect.any(Number),
    status: 410,
    error: null,
    response: 'closed for now',
    deliveryStatus: 'failed',
  });
  const one = oneJson((await admin(['webhook', 'deliveries', '--site', site.id, '--event', ids[0], '--json'])).stdout);
  expect(one.deliveries.map((d: { eventId: string }) => d.eventId)).toEqual([ids[0]]);

  // Redeliver one event, then every failed one since a time.
  receiver.on('/cli', answer(200));
  const single = await admin(['webhook', 'redeliver', '--event', ids[0], '--json']);
  expect(oneJson(single.stdout)).toEqual({ redelivered: [ids[0]] });
  workers.wake();
  await waitFor('redelivered', async () => (await deliveryOf(h, ids[0])).status === 'delivered');
  const since = new Date(Date.now() - 60_000).toISOString();
  const many = await admin(['webhook', 'redeliver', '--failed-since', since, '--site', site.id, '--json']);
  expect(oneJson(many.stdout)).toEqual({ redelivered: [ids[1]] });
  workers.wake();
  await waitFor('redelivered', async () => (await deliveryOf(h, ids[1])).status === 'delivered');
  // Signed with the rotated secret, attempt numbers continued.
  const accepted = receiver.at('/cli').filter((r) => r.headers['x-service-attempt'] === '2');
  expect(accepted.map((r) => r.json.id).sort()).toEqual([...ids].sort());
  for (const r of accepted) expect(signatureValid(secret, r.headers, r.body)).toBe(true);
  const all = oneJson((await admin(['webhook', 'deliveries', '--site', site.id, '--json'])).stdout).deliveries;
  expect(all.map((d: { attempt: number; status: number }) => [d.attempt, d.status])).toEqual([
    [2, 200],
    [2, 200],
    [1, 410],
    [1, 410],
  ]);
}, 60_000);

test('refusals go to stderr with a non-zero exit and nothing on stdout', async () => {
  const site = await h.newSite('cli-errors');
  const cases: [string[], RegExp][] = [
    [['webhook', 'set', '--site', site.id, '--url', 'http://example.com/hook', '--json'], /https:\/\//],
    [['webhook', 'set', '--site', site.id, '--url', receiver.url('/x'), '--events', 'message.deleted', '--json'], /unknown: message.deleted/],
    [['webhook', 'rotate-secret', '--site', site.id, '--json'], /not found/],
    [['webhook', 'redeliver', '--json'], /usage/],
    [['webhook', 'redeliver', '--failed-since', 'yesterday', '--site', site.id, '--json'], /ISO 8601/],
  ];
  for (const [args, message] of cases) {
    const out = await admin(args);
    expect(out.code).not.toBe(0);
    expect(out.stdout).toBe('');
    expect(out.stderr).toMatch(message);
  }
  // localhost is refused when private networks are not allowed.
  const strict = await admin(['webhook', 'set', '--site', site.id, '--url', receiver.url('/x'), '--json'], { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' });
  expect(strict.code).not.toBe(0);
  expect(strict.stderr).toMatch(/localhost resolves to a loopback/);
}, 60_000);

test('without --json, set shows the secret once with a note; setting again keeps it', async () => {
  const site = await h.newSite('cli-text');
  const first = await admin(['webhook', 'set', '--site', site.id, '--url', receiver.url('/t')]);
  expect(first.code).toBe(0);
  expect(first.stdout).toMatch(/signing secret \(shown once/);
  expect(first.stdout.match(/whsec_[0-9A-Za-z]{43}/g)).toHaveLength(1);
  const again = await admin(['webhook', 'set', '--site', site.id, '--url', receiver.url('/t2'), '--json']);
  expect(oneJson(again.stdout)).toMatchObject({ url: receiver.url('/t2'), secret: null });
}, 60_000);
