/**
 * Starts the real service and the separate delivery worker as production runs them: compiled
 * JavaScript from `npm run build` when dist/ exists (else through tsx, and the row notes it),
 * NODE_ENV=production (no response validation), logs off, the rate limit out of the way.
 */
import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
/** Where the service serves the public API (openapi/openapi.yaml `servers`). */
export const API_BASE = '/api/v1';

export interface ProcessOptions {
  /** mysql://… for MariaDB; absent for SQLite in dataDir. */
  databaseUrl?: string;
  dataDir: string;
  port: number;
  env?: Record<string, string>;
}

export interface RunningProcess {
  pid: number;
  url: string;
  stop(): Promise<void>;
}

/** How the service is run: compiled (as `npm start` will) or through tsx (development). */
export function entryPoint(compiled: string, source: string): { args: string[]; compiled: boolean } {
  const built = path.join(REPO_ROOT, compiled);
  // With source maps on, as `npm start` and `npm run worker` run the build (and deploy/ does).
  if (fs.existsSync(built)) return { args: ['--enable-source-maps', built], compiled: true };
  return { args: ['--import', 'tsx', path.join(REPO_ROOT, source)], compiled: false };
}

export function serviceEnv(opts: ProcessOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    DATA_DIR: opts.dataDir,
    // Port 0: a process that listens on nothing (the CLI, the worker); PORT then keeps its default.
    ...(opts.port > 0 ? { PORT: String(opts.port) } : {}),
    // Silent unless BENCH_LOG_LEVEL asks for what users run (`info`, the default): the access log's cost is then in the figures.
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent',
    RATE_LIMIT_PER_MINUTE: '1000000000',
    // A delivery policy under test (WEBHOOK_CONCURRENCY=32 npm run bench ...) reaches the service and the worker.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('WEBHOOK_'))),
    ...opts.env,
  };
  if (opts.databaseUrl) env.DATABASE_URL = opts.databaseUrl;
  return env;
}

function spawnNode(args: string[], env: NodeJS.ProcessEnv, name: string): { child: ChildProcess; output: () => string } {
  // Profiling the measured processes: BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=.bench/profiles'
  // (Node refuses --cpu-prof in NODE_OPTIONS, so it goes on the command line).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  // Keep the tail of what it printed, to explain a start that failed.
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.on('error', (err) => keep(Buffer.from(`${name}: ${err.message}`)));
  return { child, output: () => tail };
}

/** SIGTERM, then SIGKILL if it has not exited within graceMs. */
function stopper(child: ChildProcess, graceMs = 10_000): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill('SIGTERM');
    });
}

/** GET url with a self-signed certificate accepted; the status, or undefined when it did not answer. */
function probe(url: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = https.get(url, { rejectUnauthorized: false, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
  });
}

/**
 * Refuses a port something already answers on: a server left running by an interrupted bench would
 * answer /healthz for the one being started (which then fails to listen), and be measured instead.
 */
async function assertPortFree(url: string, name: string): Promise<void> {
  const status = await probe(`${url}/healthz`);
  if (status !== undefined)
    throw new Error(`something already answers on ${url} (HTTP ${status}), where ${name} is to start: a process left by an interrupted bench? Stop it first.`);
}

async function waitForHealthz(child: ChildProcess, output: () => string, url: string, name: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode} before answering /healthz:\n${output()}`);
    if ((await probe(`${url}/healthz`)) === 200) return;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} did not answer /healthz on ${url} in time:\n${output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * The service. The start may take a while the first time on a cached data set: the service runs
 * its migrations first (an index added since the data set was built is built then).
 */
export async function startService(opts: ProcessOptions & { startTimeoutMs?: number }): Promise<RunningProcess & { compiled: boolean }> {
  const { args, compiled } = entryPoint('dist/server/main.js', 'server/main.ts');
  const url = `https://127.0.0.1:${opts.port}`;
  await assertPortFree(url, 'the service');
  const { child, output } = spawnNode(args, serviceEnv(opts), 'the service');
  await waitForHealthz(child, output, url, 'the service', opts.startTimeoutMs ?? 600_000);
  return { pid: child.pid!, url, compiled, stop: stopper(child) };
}

/** The bare node:https + mysql2 baseline (scripts/bench/bare-server.ts). */
export async function startBareServer(opts: { databaseUrl: string; port: number; tlsCertFile: string; tlsKeyFile: string }): Promise<RunningProcess> {
  const env = {
    PATH: process.env.PATH,
    DATABASE_URL: opts.databaseUrl,
    PORT: String(opts.port),
    TLS_CERT_FILE: opts.tlsCertFile,
    TLS_KEY_FILE: opts.tlsKeyFile,
  };
  const url = `https://127.0.0.1:${opts.port}`;
  await assertPortFree(url, 'the bare server');
  const { child, output } = spawnNode(['--import', 'tsx', path.join(REPO_ROOT, 'scripts/bench/bare-server.ts')], env, 'the bare server');
  await waitForHealthz(child, output, url, 'the bare server', 60_000);
  return { pid: child.pid!, url, stop: stopper(child) };
}

/**
 * `npm run worker` (server/webhooks/worker-main.ts). It has no listener, so it is ready when it has
 * printed its start line; with LOG_LEVEL=silent nothing is printed, so it is given a moment after
 * spawning instead. `url` is empty.
 */
export async function startWorker(opts: ProcessOptions & { settleMs?: number }): Promise<RunningProcess & { compiled: boolean }> {
  const { args, compiled } = entryPoint('dist/server/webhooks/worker-main.js', 'server/webhooks/worker-main.ts');
  const { child, output } = spawnNode(args, serviceEnv(opts), 'worker');
  await new Promise((resolve) => setTimeout(resolve, opts.settleMs ?? 3000));
  if (child.exitCode !== null) throw new Error(`the worker exited with ${child.exitCode}:\n${output()}`);
  return { pid: child.pid!, url: '', compiled, stop: stopper(child) };
}
