import fs from 'node:fs';
import https from 'node:https';
import { execFile } from 'node:child_process';
import { createTestDatabase, TestDatabase } from '../helpers/db';
import { freePort, ROOT, spawnTs, Spawned } from '../helpers/spawn';
import { deliveryEnv, Receiver, signatureValid, startReceiver, waitFor } from './helpers';

/**
 * The "done when", as a user does it: the address set with the CLI, a visitor writing
 * with `visitor say`, a reply and a close through the API of the real server process, whose
 * embedded worker delivers the three events, signed.
 */
let receiver: Receiver;
let database: TestDatabase;
let server: Spawned | undefined;
let env: Record<string, string>;

beforeAll(async () => {
  receiver = await startReceiver();
  database = await createTestDatabase();
  env = {
    DATA_DIR: database.dataDir,
    DATABASE_URL: database.databaseUrl ?? '',
    NODE_ENV: 'production', // no demo data
    LOG_LEVEL: 'silent',
    ...deliveryEnv(receiver),
  };
});
afterAll(async () => {
  if (server && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exited();
  }
  await database.drop();
  await receiver.close();
});

function admin(...args: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', 'server/cli/admin.ts', ...args, '--json'],
      { cwd: ROOT, env: { ...process.env, ...env } },
      (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(JSON.parse(stdout))),
    ),
  );
}

function api(
  port: number,
  ca: string,
  method: string,
  p: string,
  key: string,
  body?: unknown,
): Promise<{ status: number; json: { data: Record<string, unknown> } }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      {
        host: 'localhost',
        port,
        method,
        path: `/api/v1${p}`,
        ca,
        headers: { Authorization: `Bearer ${key}`, ...(payload ? { 'Content-Type': 'application/json' } : {}) },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

test('CLI address, visitor say, API reply and close: the receiver gets the events, signed', async () => {
  const site = await admin('site', 'create', '--name', 'Shop');
  const key = await admin('key', 'create', '--site', String(site.id), '--scopes', 'conversations:read,conversations:write,media:read');
  const hook = await admin('webhook', 'set', '--site', String(site.id), '--url', receiver.url('/e2e'));
  const secret = String(hook.secret);

  const port = await freePort();
  server = spawnTs('server/main.ts', [], { ...env, PORT: String(port), LOG_LEVEL: 'info' });
  await server.waitFor(/listening \(HTTPS\)/, 60_000);
  const ca = fs.readFileSync(`${database.dataDir}/tls/localhost.crt`, 'utf8');

  // The visitor writes from another process: the server's worker finds it at its next poll.
  const said = await admin('visitor', 'say', '--site', String(site.id), '--visitor', 'visitor-42', '--content', 'Do you ship to Norway?');
  const conversationId = String((said.conversation as { id: string }).id);
  await waitFor('the visitor events', () => receiver.at('/e2e').length >= 2, 20_000);

  const reply = await api(port, ca, 'POST', `/conversations/${conversationId}/messages`, String(key.key), { content: 'Yes, in 3 to 5 days.' });
  expect(reply.status).toBe(201);
  const closed = await api(port, ca, 'POST', `/conversations/${conversationId}/close`, String(key.key));
  expect(closed.status).toBe(200);
  await waitFor('all four events', () => receiver.at('/e2e').length >= 4, 20_000);

  const got = receiver.at('/e2e');
  expect(got.map((r) => r.json.event).sort()).toEqual(['conversation.closed', 'conversation.started', 'message.created', 'message.created']);
  for (const r of got) {
    expect(signatureValid(secret, r.headers, r.body)).toBe(true);
    expect(r.json.workspaceKey).toBe(site.id);
    expect(r.headers['x-service-delivery']).toBe(r.json.id);
  }
  const origins = got
    .filter((r) => r.json.event === 'message.created')
    .map((r) => r.json.data.message!.origin)
    .sort();
  expect(origins).toEqual(['api', 'widget']);

  // Graceful stop with the worker inside.
  server.child.kill('SIGTERM');
  expect(await server.exited()).toBe(0);
}, 120_000);
