/**
 * The load client: keep-alive HTTPS, a fixed number of requests in flight, for a fixed time after a
 * warm-up. It runs in the benchmark's own process, on the same 2 cores as the service and MariaDB
 * (the setup), so every figure includes the client's share of the machine.
 */
import https from 'node:https';
import { summarize } from './measure';

export interface LoadRequest {
  method?: 'GET' | 'POST';
  /** Path and query on the target. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  requests: number;
  errors: number;
  /** The first unexpected answer, to tell what went wrong. */
  firstError?: string;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

export interface LoadOptions {
  /** One base URL, or several to spread the connections over (scale-out). */
  targets: string[];
  /** Connections, each with one request in flight. */
  connections: number;
  seconds: number;
  warmupSeconds: number;
  /**
   * The n-th request of a connection; called for every request. `n` never repeats for a connection
   * within this process, across runs too, so a name made of it (an Idempotency-Key, a
   * clientMessageId) is new in every round rather than a replay of the last round's.
   */
  request: (connection: number, n: number) => LoadRequest;
  /** Statuses that count as success (default 200). */
  okStatuses?: number[];
  /** Called when the timed part starts and ends (to sample the server over exactly that window). */
  onTimedStart?: () => void;
  onTimedEnd?: () => void;
}

function send(agent: https.Agent, base: URL, req: LoadRequest): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...req.headers };
    if (req.body !== undefined) headers['content-length'] = String(Buffer.byteLength(req.body));
    const r = https.request(
      { agent, host: base.hostname, port: base.port, path: req.path, method: req.method ?? 'GET', headers, rejectUnauthorized: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    r.end(req.body);
  });
}

/** One request outside a load run (setup, cursor walks); throws unless the status is expected. */
export async function fetchJson<T>(base: string, req: LoadRequest, expect = [200]): Promise<T> {
  const agent = sharedAgent();
  const res = await send(agent, new URL(base), req);
  if (!expect.includes(res.status)) throw new Error(`${req.method ?? 'GET'} ${req.path} answered ${res.status}: ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as T;
}

let agentForSetup: https.Agent | undefined;
function sharedAgent(): https.Agent {
  agentForSetup ??= new https.Agent({ keepAlive: true, maxSockets: 4 });
  return agentForSetup;
}

/** Times one request with a fresh measurement (for sequential latency, e.g. page 1 vs page 1,000). */
export async function timeOne(base: string, req: LoadRequest): Promise<{ ms: number; status: number; body: string }> {
  const started = process.hrtime.bigint();
  const res = await send(sharedAgent(), new URL(base), req);
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, ...res };
}

/** Where the next run's request numbers start: each run gets a range of its own. */
let nextFirstRequest = 0;
const REQUESTS_PER_RUN = 1e9;

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const first = nextFirstRequest;
  nextFirstRequest += REQUESTS_PER_RUN;
  const ok = opts.okStatuses ?? [200];
  const bases = opts.targets.map((t) => new URL(t));
  // One agent per target with exactly as many sockets as its connections: every request reuses one.
  const perTarget = bases.map((_, i) => Math.floor(opts.connections / bases.length) + (i < opts.connections % bases.length ? 1 : 0));
  const agents = perTarget.map((n) => new https.Agent({ keepAlive: true, maxSockets: Math.max(1, n) }));
  const samples: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let phase: 'warmup' | 'timed' | 'done' = 'warmup';
  let timedStarted = 0n;
  let timedEnded = 0n;

  const connection = async (c: number) => {
    const target = c % bases.length;
    for (let n = first; phase !== 'done'; n++) {
      const counted = phase === 'timed';
      const started = process.hrtime.bigint();
      try {
        const res = await send(agents[target], bases[target], opts.request(c, n));
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        // A request counts when it started and ended inside the timed window.
        if (!counted || phase !== 'timed') continue;
        if (ok.includes(res.status)) samples.push(ms);
        else {
          errors++;
          firstError ??= `${res.status} ${res.body.slice(0, 200)}`;
        }
      } catch (err) {
        if (counted && phase === 'timed') {
          errors++;
          firstError ??= (err as Error).message;
        }
      }
    }
  };

  const running = Array.from({ length: opts.connections }, (_, c) => connection(c));
  await new Promise((resolve) => setTimeout(resolve, opts.warmupSeconds * 1000));
  phase = 'timed';
  timedStarted = process.hrtime.bigint();
  opts.onTimedStart?.();
  await new Promise((resolve) => setTimeout(resolve, opts.seconds * 1000));
  timedEnded = process.hrtime.bigint();
  opts.onTimedEnd?.();
  phase = 'done';
  await Promise.all(running);
  for (const agent of agents) agent.destroy();

  const seconds = Number(timedEnded - timedStarted) / 1e9;
  const summary = summarize(samples);
  return { requests: samples.length, errors, firstError, seconds, perSecond: samples.length / seconds, p50Ms: summary.p50, p99Ms: summary.p99 };
}
