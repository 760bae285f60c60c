import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../platform/errors';
import type { Logger } from '../platform/logger';

/**
 * Password hashing on threads of its own. Node's async `crypto.scrypt` runs on libuv's thread pool
 * (4 threads), the pool that also reads and writes files, compresses and resolves names: a burst of
 * sign-ins at 128 MiB and a second each held it, and every media download waited behind them. Here
 * each thread runs `scryptSync` (hash-worker.cjs), so a hash never takes a libuv thread; at most
 * `threads` hashes run at once in the process and at most `queue` wait. Beyond that a hash is
 * refused at once with 503 `service_unavailable` and `Retry-After`: a fast answer to retry beats a
 * wait of tens of seconds, and the rest of the service never waits for sign-ins.
 */

/** One scrypt derivation, as the thread runs it. */
export interface ScryptJob {
  /** Already NFC-normalised. */
  password: string;
  salt: Buffer;
  keyLength: number;
  N: number;
  r: number;
  p: number;
  /** scrypt's memory cap for this job; Node's default (32 MiB) is below OWASP's cost. */
  maxmem: number;
}

/** What the pool needs of a thread: a worker_threads Worker running hash-worker.cjs, or a test's fake. */
export interface HashThread {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'exit', listener: (code: number) => void): unknown;
  terminate(): Promise<number>;
  ref(): void;
  unref(): void;
}

export interface HashPoolOptions {
  /** Hashes running at once: threads, each holding scrypt's memory (128 MiB at OWASP's cost) while it runs. */
  threads: number;
  /** Hashes waiting for a thread; one more is refused with 503. */
  queue: number;
  /** A hash not answered by then fails and its thread is replaced (a hung thread never hangs a request). */
  jobTimeoutMs?: number;
  /** A thread idle this long exits; the next hash starts a new one (some tens of milliseconds). */
  idleMs?: number;
  logger?: Pick<Logger, 'warn' | 'error'>;
  /** Makes a thread; the default runs hash-worker.cjs. */
  spawn?: () => HashThread;
}

export interface HashPoolStats {
  threads: number;
  running: number;
  queued: number;
  queueLimit: number;
  /** The deepest the queue has been since the pool was made. */
  maxQueued: number;
  /** Hashes refused because the queue was full. */
  refused: number;
  /** Hashes failed by a thread that exited, errored or timed out. */
  failed: number;
  /** Threads started so far (the first lazily, then after idling or a crash). */
  started: number;
}

export interface HashPool {
  /** The derived key, or a 503 ApiError at once when the queue is full. */
  derive(job: ScryptJob): Promise<Buffer>;
  stats(): HashPoolStats;
  /** Refuses what waits, stops every thread; later hashes are refused. */
  close(): Promise<void>;
}

/** Plain CommonJS beside this file in the sources and in the build (scripts/build.js copies it). */
export const HASH_WORKER_FILE = path.join(__dirname, 'hash-worker.cjs');

/** One thread on a 2-core machine leaves a core to the event loop and libuv; two at most by default. */
export const defaultHashThreads = (cores = os.availableParallelism()) => Math.max(1, Math.min(2, cores - 1));
/** Eight waiting hashes: at about a second each, a sign-in waits at most some 9 s on one thread. */
export const DEFAULT_HASH_QUEUE = 8;
export const MAX_HASH_THREADS = 8;

const DEFAULT_JOB_TIMEOUT_MS = 30_000;
const DEFAULT_IDLE_MS = 60_000;
/** Refusals are logged at most once a minute: a flood must not become a flood of log lines. */
const REFUSAL_LOG_EVERY_MS = 60_000;

/**
 * The real thread. `execArgv: []` keeps the parent's loaders (tsx) and flags out of it; `env: {}`
 * keeps the process's secrets (MASTER_KEY, DATABASE_URL) out of it. resourceLimits bound its
 * JavaScript heap only: scrypt's memory is native, bounded by `maxmem` and the thread count.
 */
function spawnHashWorker(): HashThread {
  return new Worker(HASH_WORKER_FILE, {
    execArgv: [],
    env: {},
    resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8, stackSizeMb: 4 },
  });
}

interface Pending {
  id: number;
  job: ScryptJob;
  resolve(key: Buffer): void;
  reject(err: Error): void;
  startedAt?: number;
  timer?: NodeJS.Timeout;
}

interface Slot {
  thread: HashThread;
  pending?: Pending;
  idleTimer?: NodeJS.Timeout;
  /** Out of the pool (idled out, timed out, closed or exited): its events change nothing. */
  gone: boolean;
  lastError?: Error;
}

const shuttingDown = () => new ApiError('service_unavailable', 'The service is shutting down; retry in a moment.', undefined, { 'Retry-After': '5' });

export function createHashPool(opts: HashPoolOptions): HashPool {
  const threads = opts.threads;
  const queueLimit = opts.queue;
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_HASH_THREADS) throw new Error(`hash threads must be 1 to ${MAX_HASH_THREADS}, got ${threads}`);
  if (!Number.isInteger(queueLimit) || queueLimit < 0) throw new Error(`hash queue must be a non-negative integer, got ${queueLimit}`);
  // Checked now, not at the first sign-in: a build without the worker file must not start.
  if (!opts.spawn && !fs.existsSync(HASH_WORKER_FILE)) throw new Error(`the password hashing worker ${HASH_WORKER_FILE} is missing (rebuild: npm run build)`);
  const spawn = opts.spawn ?? spawnHashWorker;
  const jobTimeoutMs = opts.jobTimeoutMs ?? DEFAULT_JOB_TIMEOUT_MS;
  const idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
  const logger = opts.logger;

  const slots = new Set<Slot>();
  const queue: Pending[] = [];
  const counts = { maxQueued: 0, refused: 0, failed: 0, started: 0 };
  let closed = false;
  let seq = 0;
  /** Average time of a hash (moving), for Retry-After; OWASP's cost takes about a second. */
  let averageMs = 1000;
  let refusalLoggedAt = -Infinity;

  const running = () => [...slots].filter((s) => s.pending).length;

  /** The time the queue takes to drain, at least 1 s and at most the hour the documents allow. */
  function retryAfterSeconds(): number {
    return Math.min(3600, Math.max(1, Math.ceil((averageMs * (queue.length + running())) / threads / 1000)));
  }

  function refuse(): ApiError {
    counts.refused++;
    const seconds = retryAfterSeconds();
    if (Date.now() - refusalLoggedAt >= REFUSAL_LOG_EVERY_MS) {
      refusalLoggedAt = Date.now();
      logger?.warn({ threads, queue: queueLimit, refused: counts.refused }, 'password hashing queue full: refusing sign-ins with 503 until it drains');
    }
    return new ApiError('service_unavailable', `Too many sign-ins are being checked; retry in ${seconds} s.`, undefined, { 'Retry-After': String(seconds) });
  }

  function retire(slot: Slot) {
    slot.gone = true;
    slots.delete(slot);
    clearTimeout(slot.idleTimer);
  }

  /** The slot's hash ends, with a key or an error; the slot takes the next one or idles. */
  function settle(slot: Slot, outcome: { key: Buffer } | { error: Error }) {
    const p = slot.pending;
    if (!p) return;
    slot.pending = undefined;
    clearTimeout(p.timer);
    if ('key' in outcome) {
      averageMs = averageMs * 0.8 + (Date.now() - (p.startedAt ?? Date.now())) * 0.2;
      p.resolve(outcome.key);
    } else {
      p.reject(outcome.error);
    }
  }

  function idle(slot: Slot) {
    if (slot.gone || slot.pending) return;
    // An idle thread never keeps the process alive (the CLI exits as soon as its work is done).
    slot.thread.unref();
    clearTimeout(slot.idleTimer);
    slot.idleTimer = setTimeout(() => {
      retire(slot);
      void slot.thread.terminate();
    }, idleMs);
    slot.idleTimer.unref();
  }

  function fail(slot: Slot, reason: string) {
    if (!slot.pending) return;
    counts.failed++;
    logger?.error({ err: slot.lastError, reason }, 'password hashing thread failed during a hash; a new one takes the next');
    settle(slot, { error: new Error(`The password hashing thread ${reason} during a hash; a new thread takes the next one.`) });
  }

  function newSlot(): Slot {
    const slot: Slot = { thread: spawn(), gone: false };
    counts.started++;
    slots.add(slot);
    slot.thread.on('message', (message) => {
      const m = message as { id: number; key?: Uint8Array; error?: string };
      if (slot.gone || !slot.pending || m.id !== slot.pending.id) return;
      settle(slot, m.key ? { key: Buffer.from(m.key) } : { error: new Error(`scrypt failed: ${m.error ?? 'no key'}`) });
      pump();
      idle(slot);
    });
    // Without an 'error' listener an exception in the thread would be thrown in the main thread.
    slot.thread.on('error', (err) => {
      slot.lastError = err;
    });
    slot.thread.on('exit', (code) => {
      if (slot.gone) return;
      retire(slot);
      fail(slot, `exited (code ${code}${slot.lastError ? `: ${slot.lastError.message}` : ''})`);
      pump();
    });
    return slot;
  }

  function start(slot: Slot, p: Pending) {
    clearTimeout(slot.idleTimer);
    slot.pending = p;
    p.startedAt = Date.now();
    p.timer = setTimeout(() => {
      retire(slot);
      fail(slot, `did not answer within ${jobTimeoutMs} ms and was stopped`);
      void slot.thread.terminate();
      pump();
    }, jobTimeoutMs);
    p.timer.unref();
    // A hash under way keeps the process alive until it is answered.
    slot.thread.ref();
    const { id, job } = p;
    slot.thread.postMessage({ id, ...job });
  }

  /** Hands waiting hashes to idle threads, starting threads up to the limit. */
  function pump() {
    while (queue.length && !closed) {
      let slot = [...slots].find((s) => !s.pending);
      if (!slot && slots.size < threads) {
        try {
          slot = newSlot();
        } catch (err) {
          const p = queue.shift()!;
          counts.failed++;
          logger?.error({ err }, 'could not start a password hashing thread');
          p.reject(new Error(`Could not start a password hashing thread: ${(err as Error).message}`));
          continue;
        }
      }
      if (!slot) return;
      start(slot, queue.shift()!);
    }
  }

  return {
    derive(job) {
      if (closed) return Promise.reject(shuttingDown());
      if (running() >= threads && queue.length >= queueLimit) return Promise.reject(refuse());
      return new Promise<Buffer>((resolve, reject) => {
        queue.push({ id: ++seq, job, resolve, reject });
        pump();
        counts.maxQueued = Math.max(counts.maxQueued, queue.length);
      });
    },
    stats: () => ({ threads, running: running(), queued: queue.length, queueLimit, ...counts }),
    async close() {
      closed = true;
      for (const p of queue.splice(0)) p.reject(shuttingDown());
      const stopping: Promise<number>[] = [];
      for (const slot of [...slots]) {
        retire(slot);
        if (slot.pending) settle(slot, { error: shuttingDown() });
        stopping.push(slot.thread.terminate());
      }
      await Promise.all(stopping);
    },
  };
}

let shared: HashPool | undefined;

/**
 * The pool of a hasher made without one (tests, and anything that builds the accounts service
 * directly). It starts no thread until the first hash, and its idle threads never hold the process.
 * The server, the worker and the CLI use the pool runtime.ts makes from PASSWORD_HASH_THREADS.
 */
export function sharedHashPool(): HashPool {
  shared ??= createHashPool({ threads: defaultHashThreads(), queue: DEFAULT_HASH_QUEUE, idleMs: 10_000 });
  return shared;
}
