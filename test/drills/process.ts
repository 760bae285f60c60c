import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import https from 'node:https';
import { spawn, execFile, ChildProcess } from 'node:child_process';
import { ROOT, freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';

/**
 * Real processes for the fault drills: the service exactly as `npm start` runs it, and a private
 * MariaDB server the test may kill, stop and restart. Node runs tsx as a loader in one process
 * (not the tsx CLI, which forks a child), so a SIGKILL hits the service itself.
 */

export interface Service {
  child: ChildProcess;
  port: number;
  ca: string;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function startService(env: Record<string, string>, readyTimeoutMs = 45_000): Promise<Service> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'info', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  try {
    await waitFor(
      'the service to listen',
      () => {
        if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}):\n${output}`);
        return /listening \(HTTPS\)/.test(output);
      },
      readyTimeoutMs,
    );
  } catch (err) {
    await kill();
    throw new Error(`${(err as Error).message}\n${output.slice(-3000)}`);
  }
  const ca = fs.readFileSync(path.join(env.DATA_DIR, 'tls/localhost.crt'), 'utf8');
  return { child, port, ca, output: () => output, exited, kill };
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: { data?: unknown; error?: { code: string; message: string } } | null;
  ms: number;
}

export interface CallOptions {
  key?: string;
  body?: unknown;
  /** Sent as it is (a multipart upload), with its Content-Type in `headers`; instead of `body`. */
  rawBody?: Buffer;
  headers?: Record<string, string>;
  agent?: https.Agent;
  /** The test's own bound: a hang fails with status 0 instead of blocking the test. */
  timeoutMs?: number;
  /** Another loopback address (127.0.0.2, ...) makes this client a different client IP. */
  localAddress?: string;
}

/** One HTTPS request; never throws: a transport failure is status 0 with the error in `json`. */
export function call(service: Pick<Service, 'port' | 'ca'>, method: string, p: string, opts: CallOptions = {}): Promise<Answer> {
  const started = Date.now();
  const payload = opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  return new Promise((resolve) => {
    let done = false;
    const finish = (a: Omit<Answer, 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...a, ms: Date.now() - started });
    };
    const req = https.request(
      {
        host: 'localhost',
        port: service.port,
        method,
        path: p,
        ca: service.ca,
        agent: opts.agent,
        localAddress: opts.localAddress,
        headers: {
          ...(opts.key ? { Authorization: `Bearer ${opts.key}` } : {}),
          ...(payload && !opts.rawBody ? { 'Content-Type': 'application/json' } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: Answer['json'] = null;
          try {
            json = JSON.parse(text);
          } catch {
            json = { error: { code: 'not_json', message: text.slice(0, 200) } };
          }
          finish({ status: res.statusCode!, headers: res.headers, json });
        });
        res.on('error', (err) => finish({ status: 0, headers: {}, json: { error: { code: 'transport', message: err.message } } }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`));
    }, opts.timeoutMs ?? 30_000);
    req.on('error', (err) => finish({ status: 0, headers: {}, json: { error: { code: 'transport', message: err.message } } }));
    req.end(payload);
  });
}

export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * A MariaDB server of the test's own: its data directory under the temporary directory, its own
 * port and socket. Never the shared server on 3306.
 */
export interface PrivateMariadb {
  port: number;
  /** DATABASE_URL for a database on it (created by `createDatabase`). */
  url(database: string): string;
  createDatabase(name: string): Promise<void>;
  start(): Promise<void>;
  kill(): Promise<void>;
  pause(): void;
  resume(): void;
  cleanup(): Promise<void>;
}

const MARIADBD = '/usr/sbin/mariadbd';
const INSTALL_DB = '/usr/bin/mariadb-install-db';

/** Small buffers and logs: this server holds a few rows, and the machine is shared. */
const SMALL = ['--innodb-buffer-pool-size=16M', '--innodb-log-file-size=8M', '--skip-name-resolve', '--skip-log-bin'];

export function mariadbAvailable(): boolean {
  return fs.existsSync(MARIADBD) && fs.existsSync(INSTALL_DB);
}

export async function startPrivateMariadb(): Promise<PrivateMariadb> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drill-mariadb-'));
  const datadir = path.join(dir, 'data');
  const port = await freePort();
  const user = os.userInfo().username;
  await new Promise<void>((resolve, reject) =>
    execFile(
      INSTALL_DB,
      ['--no-defaults', `--datadir=${datadir}`, '--auth-root-authentication-method=normal', '--skip-test-db', `--user=${user}`, ...SMALL],
      { timeout: 60_000 },
      (err, _out, stderr) => (err ? reject(new Error(`mariadb-install-db failed: ${stderr}`)) : resolve()),
    ),
  );
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const answers = () =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.setTimeout(500);
      // MariaDB speaks first: a greeting means it accepts clients.
      s.once('data', () => (s.destroy(), resolve(true)));
      s.once('timeout', () => (s.destroy(), resolve(false)));
      s.once('error', () => resolve(false));
    });

  const db = {
    port,
    url: (database: string) => `mysql://root@127.0.0.1:${port}/${database}`,
    async start() {
      const c = spawn(
        MARIADBD,
        [
          '--no-defaults',
          `--datadir=${datadir}`,
          `--port=${port}`,
          '--bind-address=127.0.0.1',
          `--socket=${path.join(dir, 'sock')}`,
          `--pid-file=${path.join(dir, 'pid')}`,
          `--user=${user}`,
          `--log-error=${path.join(dir, 'error.log')}`,
          ...SMALL,
        ],
        { stdio: 'ignore' },
      );
      child = c;
      exited = new Promise((resolve) => c.on('exit', () => resolve()));
      await waitFor(
        'the private MariaDB to accept clients',
        async () => {
          if (c.exitCode !== null) throw new Error(`mariadbd exited (${c.exitCode}): ${fs.readFileSync(path.join(dir, 'error.log'), 'utf8').slice(-2000)}`);
          return answers();
        },
        30_000,
      );
    },
    async kill() {
      if (child && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT'); // a stopped process must run to die cleanly from the kernel's view
        child.kill('SIGKILL');
      }
      await exited;
    },
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    async createDatabase(name: string) {
      await new Promise<void>((resolve, reject) =>
        execFile('/usr/bin/mariadb', ['-h127.0.0.1', `-P${port}`, '-uroot', '-e', `CREATE DATABASE \`${name}\``], { timeout: 20_000 }, (err, _o, stderr) =>
          err ? reject(new Error(stderr)) : resolve(),
        ),
      );
    },
    async cleanup() {
      await db.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await db.start();
  return db;
}
