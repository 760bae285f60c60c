import { spawn, ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');
/** The tsx CLI, for `tsx -e <TypeScript>` one-offs; entry points go through spawnTs. */
export const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface Spawned {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited(): Promise<number | null>;
  /** Sends `signal` (SIGKILL by default) unless it already exited, and waits for the exit and its pipes. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs a TypeScript entry point (server/main.ts, the CLI, the worker) as ONE process: Node with tsx
 * as a loader, not the tsx CLI (which forks a child that a SIGKILL of tsx would leave running,
 * holding its port, its files and jest's pipes). So a kill, and /proc/<pid>, reach the program itself.
 */
export function spawnTs(entry: string, args: string[], env: Record<string, string | undefined>): Spawned {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, entry), ...args], { cwd: ROOT, env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited: () => exit,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await closed;
    },
    waitFor: (pattern, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const started = Date.now();
        const tick = () => {
          const m = (out + err).match(pattern);
          if (m) return resolve(m);
          if (child.exitCode !== null) return reject(new Error(`process exited (${child.exitCode}) before ${pattern}:\n${out}\n${err}`));
          if (Date.now() - started > timeoutMs) return reject(new Error(`timed out waiting for ${pattern}:\n${out}\n${err}`));
          setTimeout(tick, 50);
        };
        tick();
      }),
  };
}
