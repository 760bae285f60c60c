import fs from 'node:fs';
import path from 'node:path';
import https from 'node:https';
import { spawn, ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import YAML from 'yaml';
import { ROOT } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';

/**
 * The deployment of deploy/compose.yaml as a test runs it: the same commands and settings, with the
 * host-specific ones (addresses, secrets, directories) the test's own. What is not run here: Docker,
 * HAProxy (a small proxy stands in: round-robin, TLS ended and made again, X-Forwarded-For).
 */

export interface Compose {
  env: Record<string, string>;
  command(service: string): string[];
}

export function readCompose(): Compose {
  const doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true }) as {
    'x-chat-env': Record<string, string>;
    services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
  };
  return {
    env: doc['x-chat-env'],
    command: (service) => {
      const c = doc.services[service]?.command;
      if (!c) throw new Error(`deploy/compose.yaml has no command for ${service}`);
      return c;
    },
  };
}

/** A systemd unit's ExecStart, and the settings of deploy/systemd/chat.env. */
export function readSystemd(unit: string): { execStart: string[]; env: Record<string, string> } {
  const text = fs.readFileSync(path.join(ROOT, 'deploy/systemd', unit), 'utf8');
  const execStart = text
    .match(/^ExecStart=(.*)$/m)![1]
    .trim()
    .split(/\s+/);
  const env: Record<string, string> = {};
  for (const line of fs.readFileSync(path.join(ROOT, 'deploy/systemd/chat.env'), 'utf8').split('\n')) {
    const m = line.match(/^([A-Z0-9_]+)=(.*)$/);
    if (m) env[m[1]] = m[2];
  }
  return { execStart, env };
}

/**
 * Settings of compose.yaml that name this deployment's hosts, secrets and directories: the test
 * gives its own. Every other setting of x-chat-env reaches the processes unchanged.
 */
export const HOST_SPECIFIC = [
  'DATABASE_URL',
  'REDIS_URL',
  'MASTER_KEY',
  'PUBLIC_URL',
  'TLS_CERT_FILE',
  'TLS_KEY_FILE',
  'DATA_DIR',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
];
/** The object store's settings: the drill points them at an s3rver (unless MULTI_INSTANCE_MEDIA=shared-disk: a shared DATA_DIR). */
export const MEDIA_SETTINGS = /^MEDIA_S3_|^MEDIA_STORE$|^MEDIA_DOWNLOAD$/;

export interface Proc {
  name: string;
  child: ChildProcess;
  output(): string;
  exited: Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Runs a command of compose.yaml (`node` is this Node) from the checkout, as the image's WORKDIR. */
export async function startProcess(name: string, command: string[], env: Record<string, string>, ready: RegExp): Promise<Proc> {
  const [bin, ...args] = command;
  const child = spawn(bin === 'node' ? process.execPath : bin, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const proc: Proc = {
    name,
    child,
    output: () => out,
    exited,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
  try {
    await waitFor(
      `${name} to start`,
      () => {
        if (ready.test(out)) return true;
        if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}):\n${out.slice(-3000)}`);
        return false;
      },
      90_000,
    );
  } catch (err) {
    await proc.kill();
    throw err;
  }
  return proc;
}

export interface Proxy {
  port: number;
  /** Upstream ports; a request goes to the next one that accepts it (an instance down is skipped, as a health-checked balancer does). */
  upstreams: number[];
  /** How many requests each upstream took. */
  counts: Map<number, number>;
  close(): Promise<void>;
}

/**
 * The load balancer of compose.yaml in a few lines: ends TLS with `tls`, sends each request to the
 * next instance round-robin over HTTPS, adds X-Forwarded-For, streams answers (live streams). An instance that refuses the connection is skipped; one that drops a request
 * mid-way answers 502, as HAProxy does.
 */
export async function startProxy(tls: { cert: string; key: string }, upstreams: number[]): Promise<Proxy> {
  let next = 0;
  const counts = new Map<number, number>();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, async (req, res) => {
    // Whole, so that a request to an instance that refused the connection can go to the next one.
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const attempt = (tries: number) => {
      const port = upstreams[next++ % upstreams.length];
      const up = https.request(
        {
          host: '127.0.0.1',
          port,
          servername: 'localhost',
          ca: tls.cert,
          method: req.method,
          path: req.url,
          agent: false,
          headers: { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress ?? '' },
        },
        (answer) => {
          counts.set(port, (counts.get(port) ?? 0) + 1);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          res.on('close', () => answer.destroy());
        },
      );
      up.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ECONNREFUSED' && tries < upstreams.length) return attempt(tries + 1);
        if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'bad_gateway', message: err.message } }));
      });
      up.end(body);
      res.on('close', () => up.destroy());
    };
    attempt(1);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    upstreams,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
