/**
 * Drill: a rolling upgrade. The previous release (PREVIOUS_RELEASE, the last commit before this
 * release's migrations) serves a MariaDB database; this release migrates it while the old instance
 * keeps running, starts beside it, and both serve the same data: replies, lists and files written
 * by either are read by the other, whatever order they are written in. The old code comes from git
 * history (`git archive`, so a CI clone with full history has it), built with this checkout's
 * node_modules when its lock file pins no package it runs differently (dev tools aside); otherwise the
 * drill is skipped and says why. MariaDB only: the embedded SQLite database has one process.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, TEST_DB, TestDatabase } from '../helpers/db';
import { freePort, ROOT } from '../helpers/spawn';
import { migrationSource } from '../../server/db/migrations';
import { createDb } from '../../server/db/knex';
import { call, CallOptions } from './process';
import { Proc, readCompose, startProcess } from './deployment';

/** The release before migration 036 (and before an older instance could restart on a newer database). */
const PREVIOUS_RELEASE = '0302ca2c60468ab335163313d974907eac7fe63f';
const LISTENING = /listening \(HTTPS\)/;

/** Why the previous release cannot run here, or null. */
function unavailable(): string | null {
  try {
    execFileSync('git', ['cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`], { cwd: ROOT, stdio: 'ignore' });
  } catch {
    return `commit ${PREVIOUS_RELEASE} is not in this clone (a shallow clone? fetch the full history)`;
  }
  type Lock = { packages: Record<string, { version?: string; dev?: boolean }> };
  const old = JSON.parse(execFileSync('git', ['show', `${PREVIOUS_RELEASE}:package-lock.json`], { cwd: ROOT, maxBuffer: 64 << 20 }).toString()) as Lock;
  const now = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as Lock;
  // This checkout's node_modules serve the old code when they hold every package its build and server
  // load (the lock's non-dev packages: dev tools such as the linters never run here), at its version.
  const differs = Object.entries(old.packages).filter(([name, p]) => name !== '' && !p.dev && now.packages[name]?.version !== p.version);
  return differs.length ? `its lock file pins ${differs.length} package(s) differently (${differs[0][0]}): run it with its own npm ci` : null;
}

const reason = TEST_DB === 'mysql' ? unavailable() : 'MariaDB only';
const describeIfRunnable = reason ? describe.skip : describe;
if (reason) process.stdout.write(`previous-release drill skipped: ${reason}\n`);

describeIfRunnable(`the previous release (${PREVIOUS_RELEASE.slice(0, 7)}) and this one on one database`, () => {
  const compose = readCompose();
  let database: TestDatabase;
  let oldDir: string;
  let env: Record<string, string>;
  let old: Proc | undefined;
  let current: Proc | undefined;
  const ports = { old: 0, current: 0 };
  let site: { id: string; key: string; conversationId: string };
  let ca: string;

  const api = (on: 'old' | 'current', method: string, p: string, opts: CallOptions = {}) =>
    call({ port: ports[on], ca }, method, p, { key: site.key, ...opts });
  const startOld = () => startProcess('previous release', ['node', path.join(oldDir, 'dist/server/main.js')], { ...env, PORT: String(ports.old) }, LISTENING);

  beforeAll(async () => {
    oldDir = fs.mkdtempSync(path.join(os.tmpdir(), 'previous-release-'));
    execFileSync('sh', ['-c', `git archive ${PREVIOUS_RELEASE} | tar -x -C "${oldDir}"`], { cwd: ROOT });
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(oldDir, 'node_modules'));
    execFileSync(process.execPath, ['scripts/build.js'], { cwd: oldDir, stdio: 'ignore' });

    database = await createTestDatabase({ empty: true });
    ports.old = await freePort();
    ports.current = await freePort();
    env = {
      NODE_ENV: 'production',
      DATABASE_URL: database.databaseUrl!,
      DATA_DIR: database.dataDir,
      MASTER_KEY: randomBytes(32).toString('hex'),
      EMBEDDED_WORKER: 'false',
      LOG_LEVEL: 'info',
    };
    // The previous release makes the database its own (its migrations), and serves.
    old = await startOld();
    ca = fs.readFileSync(path.join(database.dataDir, 'tls/localhost.crt'), 'utf8');
    site = await seedThroughCli(oldDir, env);
  }, 240_000);

  afterAll(async () => {
    await old?.kill('SIGKILL');
    await current?.kill('SIGKILL');
    await database?.drop();
    if (oldDir) fs.rmSync(oldDir, { recursive: true, force: true });
  }, 60_000);

  test('this release migrates the database under the running previous release, starts beside it, and each reads what the other writes', async () => {
    const migrate = await startProcess('migrate', compose.command('migrate'), env, /database is/);
    await migrate.exited;
    expect(migrate.child.exitCode).toBe(0);
    current = await startProcess('this release', compose.command('app-a'), { ...env, PORT: String(ports.current) }, LISTENING);
    const db = createDb({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR });
    try {
      const [applied] = (await db.migrate.list({ migrationSource })) as [{ name: string }[]];
      expect(applied.map((m) => m.name)).toEqual(await migrationSource.getMigrations([]));
    } finally {
      await db.destroy();
    }

    for (const on of ['old', 'current'] as const) expect((await api(on, 'GET', '/healthz')).status).toBe(200);
    expect((await api('current', 'GET', '/readyz')).status).toBe(200);
    // The previous release's /readyz asks knex, which calls a newer database's list corrupt: it says
    // not ready (yet serves). This release answers ready on a newer database (test/api/readiness.test.ts).
    expect((await api('old', 'GET', '/readyz')).status).toBe(503);

    const files = (content: string) => {
      const boundary = `b${randomBytes(4).toString('hex')}`;
      return {
        rawBody: Buffer.concat([
          Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="content"\r\n\r\n${content}\r\n`),
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${content}.txt"\r\nContent-Type: text/plain\r\n\r\n${content} body\r\n`,
          ),
          Buffer.from(`--${boundary}--\r\n`),
        ]),
        headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
      };
    };
    const path_ = `/api/v1/conversations/${site.conversationId}/messages`;
    // Interleaved, each with a file: old, new, old.
    const written = [];
    for (const [on, content] of [
      ['old', 'from-old-1'],
      ['current', 'from-new-1'],
      ['old', 'from-old-2'],
    ] as const) {
      const res = await api(on, 'POST', path_, files(content));
      expect([on, res.status]).toEqual([on, 201]);
      written.push(res.json!.data as { id: string; attachments: { id: string; name: string }[] });
    }
    for (const on of ['old', 'current'] as const) {
      const list = await api(on, 'GET', `${path_}?limit=100`);
      expect(list.status).toBe(200);
      const listed = (list.json!.data as { content: string; attachments: { name: string }[] }[]).filter((m) => m.content.startsWith('from-'));
      expect([on, listed.map((m) => [m.content, m.attachments.map((a) => a.name)])]).toEqual([
        on,
        [
          ['from-old-1', ['from-old-1.txt']],
          ['from-new-1', ['from-new-1.txt']],
          ['from-old-2', ['from-old-2.txt']],
        ],
      ]);
      // Each file downloads through either instance.
      for (const m of written) expect([on, (await api(on, 'GET', `/api/v1/media/${m.attachments[0].id}`)).status]).toEqual([on, 200]);
    }
    // The conversation list of each sees the other's last message.
    const conversation = await api('old', 'GET', `/api/v1/conversations/${site.conversationId}`);
    expect(conversation.status).toBe(200);
  }, 180_000);

  test('an instance of the previous release restarting now does not start: knex refuses migrations it does not know (fixed from this release on)', async () => {
    await old!.kill('SIGTERM');
    old = undefined;
    const restarted = await startOld().then(
      (p) => ((old = p), 'started'),
      (err: Error) => err.message,
    );
    expect(restarted).toMatch(/migration directory is corrupt, the following files are missing: .*036_attachment_count_unknown/);
  }, 120_000);
});

/** A site, a key and a conversation, made by the previous release's own CLI (the commands of its README). */
async function seedThroughCli(oldDir: string, env: Record<string, string>) {
  const admin = (...args: string[]) =>
    JSON.parse(
      execFileSync(process.execPath, [path.join(oldDir, 'dist/server/cli/admin.js'), ...args, '--json'], {
        cwd: oldDir,
        env: { ...process.env, ...env, LOG_LEVEL: 'silent' },
      }).toString(),
    );
  const site = admin('site', 'create', '--name', 'Upgrade shop');
  const key = admin('key', 'create', '--site', site.id, '--scopes', 'conversations:read,conversations:write,media:read');
  const said = admin('visitor', 'say', '--site', site.id, '--visitor', 'upgrading-visitor', '--content', 'hello before the upgrade');
  return { id: site.id as string, key: key.key as string, conversationId: said.conversation.id as string };
}
