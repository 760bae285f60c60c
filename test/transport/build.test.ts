/**
 * One build for every process (scripts/build.js). `npm run build` compiles the server and the chat
 * window's files into a fresh directory and switches the `dist` symlink to it in one rename;
 * `npm start`, `npm run worker`, `npm run admin` and `npm run db:migrate` build only when there is no
 * build or a source changed, then run node on dist/. Checked on copies of the project (a fresh
 * checkout: no dist/), with real processes started through npm as an operator would.
 */
import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { freePort, ROOT } from '../helpers/spawn';
import { TEST_DB } from '../helpers/db';

const onSqlite = TEST_DB === 'sqlite' ? describe : describe.skip; // the embedded-SQLite path, once

const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** A fresh checkout: the sources and what is read at run time, node_modules linked, no build. */
function checkout(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-checkout-'));
  for (const p of ['package.json', 'tsconfig.json', 'server', 'scripts', 'openapi', 'sdk/schemas']) {
    fs.cpSync(path.join(ROOT, p), path.join(dir, p), { recursive: true });
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

interface Proc {
  child: ChildProcess;
  out(): string;
  /** Resolves with the exit code once the process and its pipes closed. */
  closed: Promise<number | null>;
}

/** `npm run -s <script> -- args` in its own process group, so a failed test can end all of it. */
function npm(cwd: string, script: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn('npm', ['run', '-s', script, ...(args.length ? ['--', ...args] : [])], { cwd, env: { ...process.env, ...env }, detached: true });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, out: () => out, closed };
}

function killGroup(p: Proc) {
  try {
    process.kill(-p.child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function waitFor(p: Proc, pattern: RegExp, timeoutMs = 60_000): Promise<void> {
  const started = Date.now();
  while (!pattern.test(p.out())) {
    if (p.child.exitCode !== null) throw new Error(`exited ${p.child.exitCode} before ${pattern}:\n${p.out()}`);
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${pattern}:\n${p.out()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The processes a process started, from the kernel's own list (every thread's). */
function childrenOf(pid: number): number[] {
  const tasks = path.join('/proc', String(pid), 'task');
  return fs
    .readdirSync(tasks)
    .flatMap((t) =>
      fs
        .readFileSync(path.join(tasks, t, 'children'), 'utf8')
        .trim()
        .split(/\s+/),
    )
    .filter(Boolean)
    .map(Number);
}

const cmdline = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');

/** The node process an npm script ended in (`sh -c '... && exec node <file>'`: the shell became node). */
function nodeOf(p: Proc, file: string): number {
  const found = childrenOf(p.child.pid!).filter((pid) => cmdline(pid).includes(file));
  if (found.length !== 1) throw new Error(`no single ${file} under npm (${p.child.pid}): ${childrenOf(p.child.pid!).map(cmdline).join(' | ')}`);
  return found[0];
}

function get(
  port: number,
  ca: string,
  p: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: 'localhost', port, path: p, ca, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

const builds = (dir: string) => fs.readdirSync(path.join(dir, '.dist')).filter((n) => !n.startsWith('.'));
const runNode = (cwd: string, args: string[]) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, args, { cwd });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ code, out }));
  });

onSqlite('one build for every process', () => {
  const made: string[] = [];
  const procs: Proc[] = [];
  afterEach(() => procs.splice(0).forEach(killGroup));
  afterAll(() => made.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
  const fresh = () => {
    const dir = checkout();
    made.push(dir);
    return dir;
  };
  const dataDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-build-data-'));
    made.push(dir);
    return dir;
  };

  test('every production entry point checks the build, then runs its file in dist/', () => {
    for (const [script, file] of [
      ['start', 'dist/server/main.js'],
      ['worker', 'dist/server/webhooks/worker-main.js'],
      ['admin', 'dist/server/cli/admin.js'],
      ['db:migrate', 'dist/server/db/migrate-main.js'],
    ]) {
      expect(scripts[script]).toBe(`node scripts/build.js --if-stale && exec node --enable-source-maps ${file}`);
    }
    expect(scripts.build).toBe('node scripts/build.js');
  });

  test('npm run build: a complete build behind the dist symlink, precompressed window files, no compiler in the server', async () => {
    const dir = fresh();
    // A dist/ directory of the earlier layout (built in place) is moved aside, not mixed in.
    fs.mkdirSync(path.join(dir, 'dist/server'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'dist/server/main.js'), 'old');
    const built = await runNode(dir, ['scripts/build.js']);
    expect(built.code).toBe(0);
    expect(fs.lstatSync(path.join(dir, 'dist')).isSymbolicLink()).toBe(true);
    const link = fs.readlinkSync(path.join(dir, 'dist'));
    expect(link).toMatch(/^\.dist\/[0-9a-f]{20}$/);
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'dist/build.json'), 'utf8'));
    expect(manifest.id).toBe(path.basename(link));
    expect(Object.keys(manifest.inputs)).toContain('server/window/browser/panel.ts');
    for (const f of [
      'server/main.js',
      'server/webhooks/worker-main.js',
      'server/cli/admin.js',
      'server/db/migrate-main.js',
      'window/manifest.json',
      'window/loader.js.br',
      'window/loader.js.gz',
      'dashboard/manifest.json',
    ]) {
      expect([f, fs.existsSync(path.join(dir, 'dist', f))]).toEqual([f, true]);
    }
    // The browser code is bundled into window/, not compiled for node; the server never loads esbuild.
    // One module is both: the window's markdown parser, which the emails render messages with.
    expect(fs.readdirSync(path.join(dir, 'dist/server/window/browser')).filter((f) => f.endsWith('.js'))).toEqual(['markdown.js']);
    // The dashboard's TSX likewise: bundled into dashboard/ as two content-hashed files with their variants.
    expect(fs.existsSync(path.join(dir, 'dist/server/dashboard/browser'))).toBe(false);
    const dashboard = JSON.parse(fs.readFileSync(path.join(dir, 'dist/dashboard/manifest.json'), 'utf8'));
    for (const name of [dashboard.script, dashboard.style]) {
      for (const f of [name, `${name}.br`, `${name}.gz`]) expect([f, fs.existsSync(path.join(dir, 'dist/dashboard', f))]).toEqual([f, true]);
    }
    const serverFiles = fs.readdirSync(path.join(dir, 'dist/server'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
    expect(serverFiles.length).toBeGreaterThan(50);
    expect(
      serverFiles.filter((f) =>
        /require\("esbuild"\)|build-window|build-dashboard|require\("preact/.test(fs.readFileSync(path.join(dir, 'dist/server', f), 'utf8')),
      ),
    ).toEqual([]);

    // The same sources give the same build, switched to again; a fresh build changes nothing there.
    const stamp = fs.statSync(path.join(dir, 'dist/build.json')).mtimeMs;
    expect((await runNode(dir, ['scripts/build.js'])).code).toBe(0);
    expect(fs.readlinkSync(path.join(dir, 'dist'))).toBe(link);
    expect(fs.statSync(path.join(dir, 'dist/build.json')).mtimeMs).toBe(stamp);
    expect(builds(dir)).toEqual([path.basename(link)]);
  }, 60_000);

  test('a source touched is not rebuilt, a source changed is; a server already running keeps serving its own build', async () => {
    const dir = fresh();
    const { ensureBuild } = require(path.join(dir, 'scripts/build.js')) as typeof import('../../scripts/build');
    const first = await ensureBuild({ root: dir, ifStale: true });
    expect(first.built).toBe(true);
    const loaderFile = path.join(dir, 'server/window/browser/loader.ts');
    const later = new Date(Date.now() + 5000);
    fs.utimesSync(loaderFile, later, later); // a checkout or a copy changes times, not contents
    expect(await ensureBuild({ root: dir, ifStale: true })).toMatchObject({ built: false, id: first.id });

    const data = dataDir();
    const port = await freePort();
    const server = npm(dir, 'start', [], { DATA_DIR: data, PORT: String(port), DATABASE_URL: '', NODE_ENV: '', LOG_LEVEL: 'info', EMBEDDED_WORKER: 'false' });
    procs.push(server);
    await waitFor(server, /listening \(HTTPS\)/);
    const ca = fs.readFileSync(path.join(data, 'tls/localhost.crt'), 'utf8');
    const before = await get(port, ca, '/window/v1/loader.js');
    expect(before.body.equals(fs.readFileSync(path.join(dir, `.dist/${first.id}/window/loader.js`)))).toBe(true);
    const documentBefore = (await get(port, ca, '/openapi.yaml')).body;

    fs.appendFileSync(loaderFile, '\n// a change\nconsole.info("[chat window] v2");\n');
    // A document is a source too: the build carries it, as written and parsed.
    fs.appendFileSync(path.join(dir, 'openapi/openapi.yaml'), '\n# a change\n');
    const second = await ensureBuild({ root: dir, ifStale: true });
    expect(second.built).toBe(true);
    expect(second.id).not.toBe(first.id);
    expect(fs.readlinkSync(path.join(dir, 'dist'))).toBe(`.dist/${second.id}`);
    expect(builds(dir).sort()).toEqual([first.id, second.id].sort()); // the previous build stays for its readers
    expect(fs.readFileSync(path.join(dir, 'dist/window/loader.js'), 'utf8')).toContain('v2');

    // The running server loaded its modules and files from its own build: unchanged, still whole.
    const after = await get(port, ca, '/window/v1/loader.js');
    expect(after.body.equals(before.body)).toBe(true);
    expect((await get(port, ca, '/openapi.yaml')).body.equals(documentBefore)).toBe(true);
    expect(fs.readFileSync(path.join(dir, 'dist/openapi/openapi.yaml'), 'utf8')).toContain('# a change');
    process.kill(nodeOf(server, 'dist/server/main.js'), 'SIGTERM');
    expect(await server.closed).toBe(0);
  }, 90_000);

  test('a production start from a build loads neither the YAML parser, the certificate maker, the mailer nor the S3 client, and compiles no schema', async () => {
    // What a start costs, counted: the documents come parsed with the build, a certificate made once
    // is read, the document is checked against the OpenAPI schema only where answers are checked
    // (development, tests), and each request's schemas are compiled when first needed.
    const data = dataDir();
    const loaded = path.join(data, 'start.json');
    const hook = path.join(data, 'hook.js');
    fs.writeFileSync(
      hook,
      `const ajv = require(require.resolve('ajv/dist/core', { paths: [require.resolve('express-openapi-validator', { paths: [${JSON.stringify(ROOT)}] })] })).default.prototype;
      let compiled = 0;
      for (const name of ['compile', '_compileSchemaEnv']) { const original = ajv[name]; ajv[name] = function (...args) { compiled++; return original.apply(this, args); }; }
      process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify({ modules: Object.keys(require.cache), compiled })));`,
    );
    const startOnce = async () => {
      const port = await freePort();
      const env = { DATA_DIR: data, PORT: String(port), DATABASE_URL: '', NODE_ENV: 'production', LOG_LEVEL: 'warn', EMBEDDED_WORKER: 'false' };
      const child = spawn(process.execPath, ['--require', hook, 'dist/server/main.js'], { cwd: ROOT, env: { ...process.env, ...env } });
      const p: Proc = { child, out: () => out, closed: new Promise((resolve) => child.on('close', resolve)) };
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      procs.push(p);
      await waitFor(p, /dashboard\/setup#token=/);
      while (
        !fs.existsSync(path.join(data, 'tls/localhost.crt')) ||
        (await get(port, fs.readFileSync(path.join(data, 'tls/localhost.crt'), 'utf8'), '/healthz').catch(() => null))?.status !== 200
      )
        await new Promise((r) => setTimeout(r, 50));
      child.kill('SIGTERM');
      expect(await p.closed).toBe(0);
      const start = JSON.parse(fs.readFileSync(loaded, 'utf8')) as { modules: string[]; compiled: number };
      return { modules: start.modules.map((f) => path.relative(ROOT, f)), compiled: start.compiled };
    };
    const first = await startOnce(); // makes the certificate
    expect(first.modules.some((f) => f.startsWith('node_modules/selfsigned/'))).toBe(true);
    const second = await startOnce();
    expect(second.modules.filter((f) => /^node_modules\/(yaml|selfsigned|nodemailer|@aws-sdk)\//.test(f))).toEqual([]);
    // The validators were set up (the counter saw their ajv), yet compiled nothing.
    expect(second.modules.some((f) => f.startsWith('node_modules/express-openapi-validator/'))).toBe(true);
    expect(second.compiled).toBe(0);
  }, 90_000);

  test('a builder killed mid-build leaves nothing in the way: its lock and half-written directory are passed over', async () => {
    const dir = fresh();
    fs.mkdirSync(path.join(dir, '.dist/.tmp-crashed/server'), { recursive: true });
    fs.writeFileSync(path.join(dir, '.dist/.tmp-crashed/server/main.js'), 'half'); // never reached by anyone
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.on('close', r));
    fs.writeFileSync(path.join(dir, '.dist/.lock'), JSON.stringify({ pid: dead.pid, host: os.hostname(), at: Date.now() }));
    const cli = npm(dir, 'admin', ['site', 'list', '--json'], { DATA_DIR: dataDir(), DATABASE_URL: '', LOG_LEVEL: 'silent' });
    procs.push(cli);
    expect(await cli.closed).toBe(0);
    expect(JSON.parse(cli.out())).toEqual({ sites: [] });
    // Taken over and released, not waited out: a lock waited out (120 s) is not taken, so it would stay.
    expect(fs.existsSync(path.join(dir, '.dist/.lock'))).toBe(false);

    // A lock whose writer died between creating and writing it (empty, some seconds old), and a source changed.
    fs.writeFileSync(path.join(dir, '.dist/.lock'), '');
    const past = new Date(Date.now() - 10_000);
    fs.utimesSync(path.join(dir, '.dist/.lock'), past, past);
    fs.appendFileSync(path.join(dir, 'server/main.ts'), '\n');
    const rebuilt = await runNode(dir, ['scripts/build.js', '--if-stale']);
    expect(rebuilt.code).toBe(0);
    expect(fs.existsSync(path.join(dir, '.dist/.lock'))).toBe(false);
    expect(builds(dir)).toHaveLength(2);
  }, 60_000);

  test('the service, a worker and five CLI calls started together on a checkout without dist/, ten times over: all succeed; the server has no child process', async () => {
    const dir = fresh();
    const ids = new Set<string>();
    for (let round = 0; round < 10; round++) {
      fs.rmSync(path.join(dir, 'dist'), { force: true });
      fs.rmSync(path.join(dir, '.dist'), { recursive: true, force: true });
      const data = dataDir(); // a new database too: migrations race as well
      const port = await freePort();
      const env = { DATA_DIR: data, DATABASE_URL: '', NODE_ENV: '', LOG_LEVEL: 'info', EMBEDDED_WORKER: 'false', PORT: String(port) };
      const server = npm(dir, 'start', [], env);
      const worker = npm(dir, 'worker', [], env);
      const clis = Array.from({ length: 5 }, () => npm(dir, 'admin', ['site', 'list', '--json'], { ...env, LOG_LEVEL: 'silent' }));
      procs.push(server, worker, ...clis);

      for (const cli of clis) {
        const code = await cli.closed;
        expect([round, code, cli.out()]).toEqual([round, 0, expect.stringMatching(/^\{"sites":\[.*\]\}\n$/)]);
      }
      await waitFor(server, /listening \(HTTPS\)/);
      await waitFor(worker, /delivery worker started/);
      const ca = fs.readFileSync(path.join(data, 'tls/localhost.crt'), 'utf8');
      expect((await get(port, ca, '/healthz')).status).toBe(200);
      if (round === 0) {
        // Read by path at run time: the documents, the event schemas, the window's built files.
        expect((await get(port, ca, '/openapi.yaml')).status).toBe(200);
        expect((await get(port, ca, '/api/v1/schemas/message.created.json')).status).toBe(200);
        const loader = await get(port, ca, '/window/v1/loader.js', { 'Accept-Encoding': 'gzip, br' });
        expect([loader.status, loader.headers['content-encoding']]).toEqual([200, 'br']);
      }

      // No compiler, nor anything else, runs beside the server.
      const serverPid = nodeOf(server, 'dist/server/main.js');
      expect(childrenOf(serverPid)).toEqual([]);
      expect(fs.readFileSync(`/proc/${serverPid}/maps`, 'utf8')).not.toMatch(/esbuild/);
      const workerPid = nodeOf(worker, 'dist/server/webhooks/worker-main.js');

      // One build, complete, with no leftovers of the racing starters.
      expect(builds(dir)).toHaveLength(1);
      expect(fs.readdirSync(path.join(dir, '.dist')).filter((n) => n.startsWith('.'))).toEqual([]);
      ids.add(builds(dir)[0]);

      process.kill(serverPid, 'SIGTERM');
      process.kill(workerPid, 'SIGTERM');
      expect([round, await server.closed, await worker.closed]).toEqual([round, 0, 0]);
      procs.splice(0);
    }
    expect(ids.size).toBe(1); // the same sources, the same build, every time
  }, 300_000);
});
