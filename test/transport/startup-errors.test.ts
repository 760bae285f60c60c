/**
 * Start-up mistakes as an operator makes them, against the real processes (server, worker, CLI,
 * migrations): each ends with exit 1 and one line on stderr naming the setting, its problem and the
 * fix, never a stack.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { freePort, spawnTs } from '../helpers/spawn';
import { createTestDatabase, TEST_DB, TestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

jest.setTimeout(180_000);

const SERVER = 'server/main.ts';
const WORKER = 'server/webhooks/worker-main.ts';
const CLI = 'server/cli/admin.ts';
const MIGRATE = 'server/db/migrate-main.ts';

const keyA = randomBytes(32).toString('hex');
const keyB = randomBytes(32).toString('hex');

async function run(entry: string, args: string[], env: Record<string, string>, as: { uid?: number; gid?: number } = {}) {
  const p = spawnTs(entry, args, { LOG_LEVEL: 'warn', NODE_ENV: 'production', ...env }, as);
  const code = await p.exited();
  await p.kill();
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

/** The process failed the way an operator should see it: exit 1 and a last stderr line matching `line`, no stack. */
function expectOneLine(r: { code: number | null; stderr: string }, line: RegExp) {
  const lines = r.stderr.trim().split('\n');
  expect(r.code).toBe(1);
  expect(lines[lines.length - 1]).toMatch(line);
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

const freshDataDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'chat-startup-'));

test('a port in use: the server names PORT and how to fix it', async () => {
  const port = await freePort();
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(port, resolve));
  try {
    const r = await run(SERVER, [], { DATA_DIR: freshDataDir(), PORT: String(port), MASTER_KEY: keyA, DATABASE_URL: '' });
    expectOneLine(r, new RegExp(`^PORT=${port} is in use by another process: .*set PORT to a free port$`));
  } finally {
    taken.close();
  }
});

test('an existing DATA_DIR this user cannot write: named, with the fix, by every process', async () => {
  const dataDir = freshDataDir();
  let as = {};
  if (process.getuid?.() === 0)
    as = { uid: 65534, gid: 65534 }; // root writes anywhere: run as nobody
  else fs.chmodSync(dataDir, 0o500);
  for (const entry of [SERVER, WORKER, CLI, MIGRATE]) {
    const r = await run(entry, entry === CLI ? ['site', 'list'] : [], { DATA_DIR: dataDir, DATABASE_URL: '', MASTER_KEY: keyA }, as);
    expectOneLine(r, new RegExp(`DATA_DIR=${dataDir} is not writable by this process \\(EACCES\\): .*point DATA_DIR at a writable directory$`));
  }
});

test('an embedded database file that cannot be opened is named at once, without a wait', async () => {
  const dataDir = freshDataDir();
  fs.mkdirSync(path.join(dataDir, 'chat.sqlite3')); // a directory where the file should be
  const r = await run(CLI, ['site', 'list'], { DATA_DIR: dataDir, DATABASE_URL: '', MASTER_KEY: keyA });
  expect(r.stderr).not.toContain('waiting for the database');
  expectOneLine(r, /DATA_DIR: SQLite at .*chat\.sqlite3 cannot be opened \(SQLITE_CANTOPEN\)/);
});

test('an embedded database another process holds locked past the busy wait is waited for, then opened', async () => {
  const dataDir = freshDataDir();
  // A file still in rollback-journal mode, locked exclusively: what a second process meets while
  // the first switches a new file to WAL or writes it (seen with the server, a worker and CLI calls
  // started together on a new DATA_DIR).
  const Sqlite = require('better-sqlite3') as new (file: string) => { exec(s: string): unknown; close(): void };
  const holder = new Sqlite(path.join(dataDir, 'chat.sqlite3'));
  holder.exec('CREATE TABLE held (x); BEGIN EXCLUSIVE; INSERT INTO held VALUES (1);');
  // Held until the CLI says it waits: past SQLite's own 5 s busy wait, however slowly it starts.
  const cli = spawnTs(CLI, ['site', 'list', '--json'], { LOG_LEVEL: 'warn', NODE_ENV: 'production', DATA_DIR: dataDir, DATABASE_URL: '', MASTER_KEY: keyA });
  await waitFor('the CLI to wait for the locked file', () => /waiting for the database.*SQLITE_BUSY/.test(cli.stderr()), 60_000);
  holder.exec('COMMIT');
  holder.close();
  const r = { code: await cli.exited(), stdout: cli.stdout() };
  await cli.kill();
  expect([r.code, r.stdout]).toEqual([0, expect.stringMatching(/^\{"sites":\[\]\}\n$/)]);
});

test('a malformed DATABASE_URL is named, with its form, and its password is not shown', async () => {
  for (const entry of [SERVER, WORKER, CLI, MIGRATE]) {
    const r = await run(entry, entry === CLI ? ['site', 'list'] : [], { DATA_DIR: freshDataDir(), DATABASE_URL: 'mysql//chat:s3cret@db/chat' });
    expectOneLine(r, /DATABASE_URL is not a URL \("mysql\/\/chat:\*\*\*@db\/chat"\): write it as mysql:\/\/user:password@host:3306\/database/);
    expect(r.stderr).not.toContain('s3cret');
  }
  const scheme = await run(CLI, ['site', 'list'], { DATA_DIR: freshDataDir(), DATABASE_URL: 'postgres://u@h/db' });
  expectOneLine(scheme, /DATABASE_URL has the scheme postgres: where mysql: is expected/);
});

test('a database that does not answer is waited for with growing pauses, then named with the fix', async () => {
  const closed = await freePort(); // nothing listens there
  const r = await run(CLI, ['site', 'list', '--json'], {
    DATA_DIR: freshDataDir(),
    DATABASE_URL: `mysql://root@127.0.0.1:${closed}/chat`,
    DATABASE_CONNECT_TIMEOUT_SECONDS: '3',
  });
  expect(r.stdout).toBe(''); // the waiting is told on stderr: --json output stays clean
  const waits = r.stderr.split('\n').filter((l) => l.includes('waiting for the database'));
  // 0.5 s, 1 s, then 2 s more would pass the 3 s bound: exactly two waits.
  expect(waits.map((l) => JSON.parse(l).retryInMs)).toEqual([500, 1000]);
  expect(waits[0]).toContain(`127.0.0.1:${closed} does not answer yet (ECONNREFUSED)`);
  expectOneLine(
    r,
    new RegExp(
      `DATABASE_URL: the database at 127.0.0.1:${closed} did not answer for 3 s \\(ECONNREFUSED\\): start MySQL/MariaDB .*DATABASE_CONNECT_TIMEOUT_SECONDS`,
    ),
  );
});

test('a malformed MASTER_KEY is named with how to make one', async () => {
  const r = await run(CLI, ['site', 'list'], { DATA_DIR: freshDataDir(), DATABASE_URL: '', MASTER_KEY: 'abc' });
  expectOneLine(r, /MASTER_KEY: the master key must be 32 bytes .*openssl rand -hex 32$/);
});

describe('the master key check', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  beforeEach(async () => {
    database = await createTestDatabase();
    env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl ?? '', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
  });
  afterEach(() => database.drop());

  const mismatch =
    /^error: MASTER_KEY does not match the key this database was made with \(.*\): start with the MASTER_KEY this database was first started with/;

  test('a second start with another key is refused by the CLI, the worker and the server; the original key still starts', async () => {
    expect((await run(CLI, ['site', 'create', '--name', 'Acme'], { ...env, MASTER_KEY: keyA })).code).toBe(0);
    expectOneLine(await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: keyB }), mismatch);
    const port = String(await freePort());
    for (const entry of [WORKER, SERVER]) {
      expectOneLine(await run(entry, [], { ...env, MASTER_KEY: keyB, PORT: port }), /^MASTER_KEY does not match the key this database was made with/);
    }
    // Without MASTER_KEY the generated DATA_DIR/master.key is another key too, and named as such.
    expectOneLine(await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: '' }), /The master key in .*master\.key \(MASTER_KEY unset\) does not match/);
    const again = await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: keyA });
    expect([again.code, again.stdout]).toEqual([0, expect.stringContaining('Acme')]);
  });

  test('a database made before the check: the key that opens its secrets writes the check, another is refused', async () => {
    const site = JSON.parse((await run(CLI, ['site', 'create', '--name', 'Acme', '--json'], { ...env, MASTER_KEY: keyA })).stdout);
    const hook = await run(CLI, ['webhook', 'set', '--site', site.id, '--url', 'https://127.0.0.1:9/hook'], { ...env, MASTER_KEY: keyA });
    expect(hook.code).toBe(0);
    const db = knexFactory(
      database.databaseUrl
        ? { client: 'mysql2', connection: database.databaseUrl }
        : { client: 'better-sqlite3', connection: { filename: path.join(database.dataDir, 'chat.sqlite3') }, useNullAsDefault: true },
    );
    try {
      await db('master_key_check').del(); // as before the check existed
      expectOneLine(await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: keyB }), /does not match .*\(it does not decrypt the secrets already stored\)/);
      expect(await db('master_key_check').count({ n: '*' })).toEqual([{ n: 0 }]);
      expect((await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: keyA })).code).toBe(0);
      expect((await db('master_key_check').select('id')).map((r) => r.id)).toEqual(['master']);
    } finally {
      await db.destroy();
    }
    expectOneLine(await run(CLI, ['site', 'list'], { ...env, MASTER_KEY: keyB }), /\(its check value differs\)/);
  });

  test('processes starting at once on a new database with two keys: those with the first key written start, the others are refused', async () => {
    const keys = [keyA, keyB, keyA, keyB];
    const results = await Promise.all(keys.map((k) => run(CLI, ['site', 'list'], { ...env, MASTER_KEY: k })));
    const started = new Set(keys.filter((_, i) => results[i].code === 0));
    expect(started.size).toBe(1); // one key won; every process with it started
    for (const [i, r] of results.entries()) {
      if (started.has(keys[i])) expect(r.code).toBe(0);
      else expectOneLine(r, mismatch);
    }
  });
});

(TEST_DB === 'mysql' ? test : test.skip)('MariaDB coming up during the wait: the start goes on', async () => {
  const database = await createTestDatabase();
  const url = new URL(database.databaseUrl!);
  const port = await freePort();
  const proxyUrl = new URL(url);
  proxyUrl.port = String(port);
  const cli = spawnTs(CLI, ['site', 'list', '--json'], {
    DATA_DIR: database.dataDir,
    DATABASE_URL: proxyUrl.toString(),
    DATABASE_CONNECT_TIMEOUT_SECONDS: '60',
    LOG_LEVEL: 'warn',
  });
  // A TCP proxy to MariaDB that starts accepting only once the CLI said it waits.
  await cli.waitFor(/waiting for the database/);
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(url.port || 3306), url.hostname);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(port, resolve));
  try {
    expect(await cli.exited()).toBe(0);
    expect(JSON.parse(cli.stdout())).toEqual({ sites: [] });
  } finally {
    await cli.kill();
    proxy.close();
    await database.drop();
  }
});
