/**
 * The event receiver of the delivery benchmark: a local HTTPS server that answers every POST with
 * 200 at once and notes, per event id (X-Service-Delivery), when it first arrived and the event's
 * own createdAt. It runs in a child process of its own, so its CPU is never counted as the
 * service's or the worker's, and talks to the benchmark over Node's IPC channel.
 *
 * `startReceiver()` forks this file; the child serves (`require.main === module` below).
 */
import { fork, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeSelfSignedCert } from '../../server/platform/tls';

export interface ReceiverStats {
  /** Requests answered since the last reset, retries included. */
  requests: number;
  /** TLS connections accepted since the last reset: requests / connections shows the reuse. */
  connections: number;
  /** Distinct event ids seen since the last reset. */
  distinct: number;
  /** Requests for an id seen before (retries or double sends). */
  duplicates: number;
}

/** One event's first arrival: [event id, the event's createdAt (ms), arrival time (ms)]. */
export type Arrival = [id: string, createdAtMs: number, arrivedAtMs: number];

type Request =
  { seq: number; type: 'reset' } | { seq: number; type: 'stats' } | { seq: number; type: 'arrivals' } | { seq: number; type: 'when-count'; count: number };

/** A request as the parent writes it; `ask` numbers it. */
type Unnumbered<T> = T extends unknown ? Omit<T, 'seq'> : never;

type Reply =
  | { type: 'ready'; port: number; caFile: string }
  | { seq: number; type: 'done' }
  | { seq: number; type: 'stats'; stats: ReceiverStats }
  | { seq: number; type: 'arrivals'; arrivals: Arrival[] }
  | { seq: number; type: 'reached'; at: number };

/** A reply to one numbered request. */
type Answer = Exclude<Reply, { type: 'ready' }>;

export interface Receiver {
  pid: number;
  /** The address to give the service: `https://localhost:<port><path>`. */
  url(pathname: string): string;
  /** The receiver's self-signed certificate (its own CA), for WEBHOOK_CA_FILE and the bare loop. */
  caFile: string;
  ca: string;
  port: number;
  /** Forgets every arrival and zeroes the counters; a whenCount still waiting is dropped (never resolves). */
  reset(): Promise<void>;
  stats(): Promise<ReceiverStats>;
  arrivals(): Promise<Arrival[]>;
  /** Resolves with the arrival time of the count-th distinct event since the last reset. */
  whenCount(count: number): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the receiver in its own process; resolves once it listens. */
export async function startReceiver(): Promise<Receiver> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-receiver-'));
  // Through tsx, like processes.ts starts the service from source.
  const child: ChildProcess = fork(__filename, [], {
    env: { ...process.env, BENCH_RECEIVER_DIR: dir },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (answer: Answer | null) => void>(); // null: the receiver stopped
  let seq = 0;

  const ready = await new Promise<{ port: number; caFile: string }>((resolve, reject) => {
    child.once('exit', (code) => {
      fs.rmSync(dir, { recursive: true, force: true });
      reject(new Error(`the receiver exited with ${code} before listening`));
    });
    child.on('message', (reply: Reply) => {
      if (reply.type === 'ready') return resolve(reply);
      waiting.get(reply.seq)?.(reply);
      waiting.delete(reply.seq);
    });
  });
  child.removeAllListeners('exit');
  child.on('exit', () => {
    for (const [, answer] of waiting) answer(null);
    waiting.clear();
  });

  function ask<T extends Answer>(request: Unnumbered<Request>): Promise<T> {
    return new Promise((resolve, reject) => {
      if (!child.connected) return reject(new Error('the receiver has stopped'));
      const id = ++seq;
      waiting.set(id, (answer) => (answer ? resolve(answer as T) : reject(new Error('the receiver has stopped'))));
      child.send({ ...request, seq: id });
    });
  }

  return {
    pid: child.pid!,
    url: (pathname) => `https://localhost:${ready.port}${pathname}`,
    caFile: ready.caFile,
    ca: fs.readFileSync(ready.caFile, 'utf8'),
    port: ready.port,
    reset: async () => void (await ask({ type: 'reset' })),
    stats: async () => (await ask<Extract<Reply, { type: 'stats' }>>({ type: 'stats' })).stats,
    arrivals: async () => (await ask<Extract<Reply, { type: 'arrivals' }>>({ type: 'arrivals' })).arrivals,
    whenCount: async (count) => (await ask<Extract<Reply, { type: 'reached' }>>({ type: 'when-count', count })).at,
    stop: () =>
      new Promise<void>((resolve) => {
        const done = () => {
          fs.rmSync(dir, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', done);
        child.kill('SIGTERM');
      }),
  };
}

/** The child: serves until its parent goes away or sends SIGTERM. */
async function serve(dir: string): Promise<void> {
  const send = (reply: Reply) => process.send?.(reply);
  const pair = await makeSelfSignedCert();
  const caFile = path.join(dir, 'ca.pem');
  fs.writeFileSync(caFile, pair.cert);

  let first = new Map<string, [createdAtMs: number, arrivedAtMs: number]>();
  let arrivalOrder: number[] = []; // arrival time of the 1st, 2nd, … distinct event
  let stats: ReceiverStats = { requests: 0, connections: 0, distinct: 0, duplicates: 0 };
  // Waiters for a count of distinct events, answered on the arrival that reaches it.
  let waiters: { seq: number; count: number }[] = [];

  const answerWaiters = () => {
    const reached = waiters.filter((w) => stats.distinct >= w.count);
    if (reached.length === 0) return;
    waiters = waiters.filter((w) => stats.distinct < w.count);
    for (const w of reached) send({ seq: w.seq, type: 'reached', at: arrivalOrder[w.count - 1] });
  };

  const server = https.createServer({ cert: pair.cert, key: pair.key }, (req, res) => {
    const arrivedAt = Date.now(); // the headers are in: the attempt has reached the receiver
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
      stats.requests++;
      const id = String(req.headers['x-service-delivery'] ?? '');
      if (first.has(id)) {
        stats.duplicates++;
        return;
      }
      let createdAt = NaN;
      try {
        createdAt = Date.parse((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { createdAt?: string }).createdAt ?? '');
      } catch {
        // Not an event body: the arrival still counts, without a createdAt.
      }
      first.set(id, [createdAt, arrivedAt]);
      arrivalOrder.push(arrivedAt);
      stats.distinct++;
      answerWaiters();
    });
  });
  // Longer than any client's idle time, so a reused connection is never closed under a request in flight.
  server.keepAliveTimeout = 65_000;
  server.on('secureConnection', () => stats.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  process.on('message', (request: Request) => {
    switch (request.type) {
      case 'reset':
        first = new Map();
        arrivalOrder = [];
        stats = { requests: 0, connections: 0, distinct: 0, duplicates: 0 };
        waiters = [];
        return send({ seq: request.seq, type: 'done' });
      case 'stats':
        return send({ seq: request.seq, type: 'stats', stats: { ...stats } });
      case 'arrivals':
        return send({ seq: request.seq, type: 'arrivals', arrivals: [...first].map(([id, [createdAt, arrivedAt]]) => [id, createdAt, arrivedAt]) });
      case 'when-count':
        waiters.push({ seq: request.seq, count: request.count });
        return answerWaiters();
    }
  });
  const stop = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('disconnect', stop);
  send({ type: 'ready', port: (server.address() as AddressInfo).port, caFile });
}

if (require.main === module) {
  serve(process.env.BENCH_RECEIVER_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-receiver-'))).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
