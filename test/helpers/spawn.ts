import { spawn, ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');
/** The tsx CLI, for `tsx -e <TypeScript>` one-offs; entry points go through spawnTs. */
export const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

/** Where the ports handed out are reserved, one file per port holding its process id: shared by every test process of this machine. */
const PORT_LOCKS = path.join(os.tmpdir(), 'chat-service-test-ports');
let swept = false;

/** Ports outside the kernel's ephemeral range (the one listen(0) and outgoing connections draw from). */
function portRange(): [number, number] {
  let [low, high] = [32768, 60999];
  try {
    [low, high] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  } catch {
    // not Linux: its usual range
  }
  return low >= 21_000 ? [20_000, low - 1] : [high + 1, 65_535];
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The process holding a lock, or 0 while its creator has not written it yet. */
const holderOf = (lock: string) => Number(fs.readFileSync(lock, 'utf8'));

/** Takes the port's lock file, or one whose process is gone; false when another live process holds it. */
function reserve(port: number): boolean {
  const lock = path.join(PORT_LOCKS, String(port));
  for (let tries = 0; tries < 2; tries++) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = holderOf(lock);
      if (!holder || alive(holder)) return false;
      fs.rmSync(lock, { force: true }); // its process ended (jest ends its workers without an 'exit' we could hook)
    }
  }
  return false;
}

/** Once a process: drops the locks of processes that have ended, so the directory stays small. */
function sweepOnce() {
  if (swept) return;
  swept = true;
  fs.mkdirSync(PORT_LOCKS, { recursive: true });
  for (const name of fs.readdirSync(PORT_LOCKS)) {
    const lock = path.join(PORT_LOCKS, name);
    try {
      const holder = holderOf(lock);
      if (holder && !alive(holder)) fs.rmSync(lock, { force: true });
    } catch {
      // taken or dropped by another process meanwhile
    }
  }
}

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    // No host: the wildcard address, which clashes with a listener on any address of the port.
    probe.listen(port, () => probe.close(() => resolve(true)));
  });

/**
 * A port for a server a test starts (or one to find nothing on), free now and given to no other test
 * process of this machine until this one exits. listen(0) is not enough: its port is released before
 * the spawned server binds it, and the kernel hands the same range to other processes' listen(0) and
 * outgoing connections meanwhile. So the port comes from below that range, and a lock file that only
 * one process can create keeps it ours (another checkout's test run included).
 */
export async function freePort(): Promise<number> {
  sweepOnce();
  const [low, high] = portRange();
  const size = high - low + 1;
  const first = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i++) {
    const port = low + ((first + i) % size);
    if (!reserve(port)) continue;
    if (await canListen(port)) return port;
    fs.rmSync(path.join(PORT_LOCKS, String(port)), { force: true }); // something outside the tests listens there
  }
  throw new Error(`no free port in ${low}-${high}`);
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
export function spawnTs(entry: string, args: string[], env: Record<string, string | undefined>, as: { uid?: number; gid?: number } = {}): Spawned {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, entry), ...args], { cwd: ROOT, env: { ...process.env, ...env }, ...as });
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
    // A liveness bound, not a measure: a loaded CI machine starts tsx slowly.
    waitFor: (pattern, timeoutMs = 90_000) =>
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
