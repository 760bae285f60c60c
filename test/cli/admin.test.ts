/** The operator CLI as operators run it: a separate process on the same database as the server. */
import fs from 'node:fs';
import { testApp } from '../helpers/test-app';
import path from 'node:path';
import request from 'supertest';
import { adminCli, AdminCli } from '../helpers/admin-cli';
import type { TestDatabase } from '../helpers/db';
import type { Runtime } from '../../server/runtime';

let cli: AdminCli;
let database: TestDatabase;
let runtime: Runtime;

const admin = (...args: string[]) => cli.admin(args);
const adminJson = (...args: string[]) => cli.adminJson(args);

beforeAll(async () => {
  cli = await adminCli();
  ({ database, runtime } = cli);
});
afterAll(() => cli.close());

test('site, keys, visitor and agent, end to end with the API', async () => {
  const site = await adminJson('site', 'create', '--name', 'Acme shop');
  expect(site).toEqual({ id: expect.stringMatching(/^ws_/), name: 'Acme shop' });

  const key = await adminJson('key', 'create', '--site', site.id, '--scopes', 'conversations:read,conversations:write,media:read');
  expect(key).toEqual({
    id: expect.stringMatching(/^key_/),
    key: expect.stringMatching(/^wck_/),
    scopes: ['conversations:read', 'conversations:write', 'media:read'],
  });

  const listed = await adminJson('key', 'list', '--site', site.id);
  expect(listed.keys).toHaveLength(1);
  expect(JSON.stringify(listed)).not.toContain(key.key);
  expect(listed.keys[0]).toMatchObject({ id: key.id, revokedAt: null });

  fs.writeFileSync(path.join(database.dataDir, 'receipt.txt'), 'paid');
  const said = await adminJson(
    'visitor',
    'say',
    '--site',
    site.id,
    '--visitor',
    'alice',
    '--content',
    'Hello from the site',
    '--file',
    path.join(database.dataDir, 'receipt.txt'),
  );
  expect(said.conversation.state).toBe('open');
  expect(said.message).toMatchObject({ direction: 'incoming', origin: 'widget', content: 'Hello from the site' });
  expect(said.message.attachments[0]).toMatchObject({ name: 'receipt.txt', mimeType: 'text/plain', size: 4 });

  const agent = await adminJson('agent', 'say', '--conversation', said.conversation.id, '--content', 'Hi Alice');
  expect(agent.message).toMatchObject({ direction: 'outgoing', origin: 'messenger', apiKeyId: null });

  // The API sees what the CLI wrote, with the CLI's key.
  const app = testApp(runtime.services);
  const msgs = await request(app).get(`/api/v1/conversations/${said.conversation.id}/messages`).set('Authorization', `Bearer ${key.key}`);
  expect(msgs.body.data.map((m: { content: string }) => m.content)).toEqual(['Hello from the site', 'Hi Alice']);

  // A closed conversation stays closed; the visitor's next message starts a new one.
  await request(app).post(`/api/v1/conversations/${said.conversation.id}/close`).set('Authorization', `Bearer ${key.key}`);
  const again = await adminJson('visitor', 'say', '--site', site.id, '--visitor', 'alice', '--content', 'One more thing');
  expect(again.conversation.id).not.toBe(said.conversation.id);
  const closedAgent = await admin('agent', 'say', '--conversation', said.conversation.id, '--content', 'late', '--json');
  expect(closedAgent.code).not.toBe(0);
  expect(closedAgent.stdout).toBe('');
  expect(closedAgent.stderr).toMatch(/conversation_closed/);

  const revoked = await adminJson('key', 'revoke', key.id);
  expect(revoked).toEqual({ id: key.id, revokedAt: expect.stringMatching(/Z$/) });
  expect((await request(app).get('/api/v1/conversations').set('Authorization', `Bearer ${key.key}`)).status).toBe(401);
}, 120_000);

test('errors go to stderr with a non-zero exit and nothing on stdout', async () => {
  for (const args of [
    ['key', 'create', '--site', 'ws_missing', '--scopes', 'conversations:read'],
    ['key', 'create', '--site', 'x', '--scopes', 'everything'],
    ['nonsense', 'command'],
    ['site', 'create'],
  ]) {
    const r = await admin(...args, '--json');
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^error: /);
  }
}, 60_000);

test('a service error reads the same from every command: code, message, then each problem it lists', async () => {
  const site = await adminJson('site', 'create', '--name', 'Errors shop');
  const empty = await admin('visitor', 'say', '--site', site.id, '--visitor', 'v-err', '--content', '', '--json');
  expect(empty.code).not.toBe(0);
  expect(empty.stdout).toBe('');
  expect(empty.stderr).toMatch(/^error: invalid_request: .+\n {2}\/body\/content: .+\n$/);
  const missing = await admin('agent', 'say', '--conversation', 'conv_00000000000000000000000000', '--content', 'hi');
  expect(missing.stderr).toMatch(/^error: not_found: .+\n$/);
  const plainHttp = await admin('webhook', 'set', '--site', site.id, '--url', 'http://example.com/hook');
  expect(plainHttp.stderr).toMatch(/^error: invalid_request: .*https:\/\/.*\n$/);
  // A usage mistake has no code.
  const usage = await admin('key', 'revoke');
  expect(usage.stderr).toBe('error: usage: key revoke <key id>\n');
}, 60_000);

test("visitor revoke voids one visitor's chat window access, or every visitor's of a site", async () => {
  const site = await adminJson('site', 'create', '--name', 'Revoking shop');
  await adminJson('site', 'update', '--site', site.id, '--allowed-origins', 'https://shop.example');
  const app = testApp(runtime.services);
  const gateway = (body: object) => request(app).post(`/window/v1/sites/${site.id}/token`).set('Origin', 'https://shop.example').send(body);
  const [alice, bob] = [(await gateway({})).body.data, (await gateway({})).body.data];

  const one = await adminJson('visitor', 'revoke', '--site', site.id, '--visitor', alice.visitorId);
  expect(one).toEqual({ siteId: site.id, visitorId: alice.visitorId, revokedBefore: expect.stringMatching(/Z$/) });
  expect((await gateway({ visitorCredential: alice.visitorCredential })).status).toBe(401);
  expect((await request(app).get(`/window/v1/sites/${site.id}/conversation`).set('Authorization', `Bearer ${alice.token}`)).status).toBe(401);
  expect((await gateway({ visitorCredential: bob.visitorCredential })).status).toBe(201);

  const all = await adminJson('visitor', 'revoke', '--site', site.id, '--all');
  expect(all).toEqual({ siteId: site.id, visitorId: null, revokedBefore: expect.stringMatching(/Z$/) });
  expect((await gateway({ visitorCredential: bob.visitorCredential })).status).toBe(401);
  expect((await admin('visitor', 'revoke', '--site', site.id, '--all')).stdout).toMatch(/^every visitor of ws_\S+: .* are void\n$/);

  const mistakes: [string[], RegExp][] = [
    [['--site', site.id], /^error: give --visitor V or --all\n$/],
    [['--site', site.id, '--all', '--visitor', 'v'], /^error: give --visitor V or --all\n$/],
    [['--site', site.id, '--visitor', 'has space'], /^error: invalid_request: .+\n$/],
    [['--site', 'ws_00000000000000000000000000', '--all'], /^error: not_found: .+\n$/],
  ];
  for (const [args, stderr] of mistakes) {
    const r = await admin('visitor', 'revoke', ...args, '--json');
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(stderr);
  }
}, 120_000);
