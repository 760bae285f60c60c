/**
 * Production runs the compiled build: `npm run build` writes dist/, and `npm start`, `npm run worker`,
 * `npm run admin` and `npm run db:migrate` build, then run node on dist/ (tsx is for development).
 * Everything read by path at run time (the documents, the event schemas, the chat window's browser
 * sources, the migrations) must be found from dist/ as from the sources.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { freePort, ROOT } from '../helpers/spawn';
import { TEST_DB } from '../helpers/db';

const onSqlite = TEST_DB === 'sqlite' ? describe : describe.skip; // it writes dist/ once, and runs the embedded-SQLite path

const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** The node arguments a script runs after building: `npm run -s build && exec node <args>`. */
function compiledEntry(script: string): string[] {
  const match = /^npm run -s build && exec node (.+)$/.exec(scripts[script]);
  if (!match) throw new Error(`"${script}" does not build and then run node: ${scripts[script]}`);
  return match[1].split(' ');
}

interface Run {
  code: number | null;
  out: string;
}

function run(command: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

function get(port: number, ca: string, p: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: 'localhost', port, path: p, ca, headers }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      })
      .on('error', reject);
  });
}

onSqlite('the compiled build', () => {
  let dataDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-build-'));
    env = { DATA_DIR: dataDir, DATABASE_URL: '', NODE_ENV: '', LOG_LEVEL: 'info', EMBEDDED_WORKER: 'false' };
    const build = await run('npm', ['run', '-s', 'build']);
    expect(build).toEqual({ code: 0, out: '' });
  }, 60_000);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test('every production entry point builds first, then runs its file in dist/', () => {
    for (const [script, file] of [['start', 'dist/server/main.js'], ['worker', 'dist/server/webhooks/worker-main.js'], ['admin', 'dist/server/cli/admin.js'], ['db:migrate', 'dist/server/db/migrate-main.js']]) {
      expect(compiledEntry(script).at(-1)).toBe(file);
      expect(fs.existsSync(path.join(ROOT, file))).toBe(true);
    }
  });

  test('db:migrate and admin run from dist/', async () => {
    const migrated = await run(process.execPath, compiledEntry('db:migrate'), env);
    expect(migrated.out).toMatch(/database is at the latest schema/);
    expect(migrated.code).toBe(0);
    const site = await run(process.execPath, [...compiledEntry('admin'), 'site', 'create', '--name', 'Built', '--json'], env);
    expect(site.code).toBe(0);
    expect(JSON.parse(site.out)).toEqual({ id: expect.stringMatching(/^ws_/), name: 'Built' });
  }, 30_000);

  test('the server starts from dist/ and finds every file it reads by path', async () => {
    const port = await freePort();
    const server = spawn(process.execPath, compiledEntry('start'), { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) } });
    let out = '';
    server.stdout.on('data', (d) => (out += d));
    server.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => server.on('close', resolve));
    try {
      const started = Date.now();
      while (!out.includes('listening (HTTPS)')) {
        if (server.exitCode !== null || Date.now() - started > 30_000) throw new Error(`the compiled server did not start:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const ca = fs.readFileSync(path.join(dataDir, 'tls/localhost.crt'), 'utf8');
      const health = await get(port, ca, '/healthz');
      expect(health).toEqual({ status: 200, body: JSON.stringify({ data: { status: 'ok' } }) });
      const refused = await get(port, ca, '/api/v1/conversations');
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
      // Read by path at run time: the document (validator, /openapi.yaml), the event schemas, the window's sources.
      expect((await get(port, ca, '/openapi.yaml')).status).toBe(200);
      expect((await get(port, ca, '/api/v1/schemas/message.created.json')).status).toBe(200);
      expect((await get(port, ca, '/window/v1/loader.js')).status).toBe(200);
      server.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (server.exitCode === null) server.kill('SIGKILL');
      await exited;
    }
  }, 60_000);
});
