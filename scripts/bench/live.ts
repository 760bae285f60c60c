/**
 * The live part of `npm run bench`: server CPU per API reply while 0, 100 and 500 chat
 * window streams (Server-Sent Events) of other visitors are open on the reply's site. An event
 * should wake only the streams of its own visitor, so the figure with streams open stays within
 * 1.2x of the figure with none.
 *
 * Every visitor has a conversation, as one who wrote before and keeps the window open does. The
 * streams come from several loopback addresses (127.0.1.x), each below the service's 20 streams per
 * client IP, and HTTP_MAX_CONNECTIONS is raised so the process takes 500. Replies go to 16
 * other visitors' conversations; the counts alternate within each round, on their own database.
 */
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import type { BenchContext } from './context';
import type { Engine } from './options';
import { BenchRow, median, sampleProcess } from './measure';
import { createDatabase } from './delivery';
import { fetchJson, runLoad, LoadRequest } from './load';
import { API_BASE, startService } from './processes';
import { tlsEnv } from './read';
import { joinNotes } from './compare';

export const STREAM_COUNTS = [0, 100, 500];
/** Conversations the replies go to (their visitors hold no stream). */
const TARGETS = 16;
const CONNECTIONS = 8;
export const ORIGIN = 'https://bench.example';
/** Streams opened from one loopback address: below the service's default of 20 per client IP. */
const STREAMS_PER_CLIENT_IP = 16;
const SETUP_PARALLEL = 16;
/** How long the service's CPU is sampled with the streams open and nothing written: one heartbeat period (15 s). */
const IDLE_MS = 15_000;

/** The loopback IP stream `i` is opened from, so no client IP holds more than `perClientIp`. */
export function clientIp(i: number, perClientIp = STREAMS_PER_CLIENT_IP): string {
  const k = Math.floor(i / perClientIp);
  return `127.0.${1 + Math.floor(k / 250)}.${1 + (k % 250)}`;
}

export interface Visitor {
  credential: string;
  conversationId: string;
}

interface OpenStream {
  /** Events other than `ready` it received (a bystander should get none). */
  events(): number;
  closed(): boolean;
  close(): void;
}

const window = (siteId: string, rest: string) => `/window/v1/sites/${siteId}${rest}`;

export async function inParallel<T>(count: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(SETUP_PARALLEL, count) }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await make(i);
      }
    }),
  );
  return out;
}

export async function token(base: string, siteId: string, credential?: string): Promise<{ token: string; visitorCredential: string }> {
  const answer = await fetchJson<{ data: { token: string; visitorCredential: string } }>(
    base,
    {
      method: 'POST',
      path: window(siteId, '/token'),
      headers: { origin: ORIGIN, 'content-type': 'application/json' },
      body: JSON.stringify(credential ? { visitorCredential: credential } : {}),
    },
    [201],
  );
  return answer.data;
}

/** A visitor who wrote once: their credential (to come back) and conversation. */
export async function newVisitor(base: string, siteId: string, i: number): Promise<Visitor> {
  const t = await token(base, siteId);
  const sent = await fetchJson<{ data: { conversation: { id: string } } }>(
    base,
    {
      method: 'POST',
      path: window(siteId, '/messages'),
      headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: `hello from visitor ${i}`, clientMessageId: `bench-${i}` }),
    },
    [201],
  );
  return { credential: t.visitorCredential, conversationId: sent.data.conversation.id };
}

/** A stream of the visitor, from `localAddress`; resolves once `ready` arrived. */
function openStream(base: URL, siteId: string, bearer: string, localAddress: string): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    let events = 0;
    let closed = false;
    let ready = false;
    let head = '';
    const req = https.request(
      {
        host: base.hostname,
        port: base.port,
        path: window(siteId, '/events'),
        headers: { authorization: `Bearer ${bearer}`, accept: 'text/event-stream' },
        rejectUnauthorized: false,
        agent: false,
        localAddress,
        family: 4,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`a stream from ${localAddress} answered ${res.statusCode}`));
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (ready) {
            events += chunk.split('\nevent: ').length - 1;
            return;
          }
          head += chunk;
          if (!head.includes('event: ready')) return;
          ready = true;
          resolve({ events: () => events, closed: () => closed, close: () => req.destroy() });
        });
        res.on('close', () => {
          closed = true;
          if (!ready) reject(new Error(`a stream from ${localAddress} ended before ready`));
        });
      },
    );
    req.on('error', (err) => (ready ? (closed = true) : reject(err)));
    req.end();
  });
}

export async function runLivePart(ctx: BenchContext, engine: Engine): Promise<BenchRow[]> {
  const name = engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const database = engine === 'mysql' ? await createDatabase(ctx.options.mysqlServerUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-live-'));
  const env: NodeJS.ProcessEnv = { DATA_DIR: dataDir, LOG_LEVEL: 'silent' };
  if (database) env.DATABASE_URL = database.url;
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const runtime = await openRuntime(loadConfig(env));
    const site = await runtime.services.access.createSite('Live bench');
    const key = await runtime.services.access.createKey(site.id, ['conversations:read', 'conversations:write']);
    await runtime.services.access.setAllowedOrigins(site.id, [ORIGIN]);
    await runtime.close();
    service = await startService({ databaseUrl: database?.url, dataDir, port: ctx.nextPort(), env: { ...tlsEnv(ctx), HTTP_MAX_CONNECTIONS: '4000' } });
    const base = new URL(service.url);
    const most = Math.max(...STREAM_COUNTS);
    ctx.log(`live on ${name}: ${TARGETS + most} visitors write their first message`);
    const visitors = await inParallel(TARGETS + most, (i) => newVisitor(service!.url, site.id, i));
    const targets = visitors.slice(0, TARGETS);
    const bystanders = visitors.slice(TARGETS);
    const runId = randomBytes(4).toString('hex');
    const reply = (c: number, n: number): LoadRequest => ({
      method: 'POST',
      path: `${API_BASE}/conversations/${targets[(c * 131 + n) % TARGETS].conversationId}/messages`,
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: `live bench ${runId} reply ${n} from connection ${c}` }),
    });

    const samples = new Map(
      STREAM_COUNTS.map((n) => [
        n,
        [] as { cpuPerOp: number; perSecond: number; p50: number; p99: number; busy: boolean; idleCpuPerSecond: number; lost: number; stray: number }[],
      ]),
    );
    for (let round = 1; round <= ctx.options.rounds; round++) {
      for (const count of STREAM_COUNTS) {
        // Tokens last 10 minutes: each run opens its streams with fresh ones.
        const open = await inParallel(count, async (i) =>
          openStream(base, site.id, (await token(service!.url, site.id, bystanders[i].credential)).token, clientIp(i)),
        );
        try {
          const busy = (await ctx.quiet()) !== '';
          // What the open streams cost with nothing written (their heartbeats), beside the figure.
          const idle = sampleProcess(service.pid);
          await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
          const idleCpuPerSecond = idle.stop().cpuMs / (IDLE_MS / 1000);
          let sampler: ReturnType<typeof sampleProcess> | undefined;
          let cpuMs = 0;
          const result = await runLoad({
            targets: [service.url],
            connections: CONNECTIONS,
            seconds: ctx.options.seconds,
            warmupSeconds: ctx.options.warmupSeconds,
            request: reply,
            okStatuses: [201],
            onTimedStart: () => (sampler = sampleProcess(service!.pid)),
            onTimedEnd: () => (cpuMs = sampler!.stop().cpuMs),
          });
          const sample = {
            cpuPerOp: result.requests ? cpuMs / result.requests : NaN,
            perSecond: result.perSecond,
            p50: result.p50Ms,
            p99: result.p99Ms,
            busy,
            idleCpuPerSecond,
            lost: open.filter((s) => s.closed()).length,
            stray: open.reduce((sum, s) => sum + s.events(), 0),
          };
          samples.get(count)!.push(sample);
          ctx.log(
            `  live round ${round} ${count} streams: idle ${idleCpuPerSecond.toFixed(0)} ms CPU/s; ${sample.perSecond.toFixed(0)} replies/s, ${sample.cpuPerOp.toFixed(2)} ms CPU/reply` +
              `${result.errors ? `, ${result.errors} errors (${result.firstError})` : ''}${sample.lost ? `, ${sample.lost} streams closed` : ''}${busy ? ' (machine busy)' : ''}`,
          );
        } finally {
          for (const s of open) s.close();
        }
        await new Promise((resolve) => setTimeout(resolve, 500)); // the service lets the closed streams go
      }
    }

    const none = median(samples.get(0)!.map((s) => s.cpuPerOp));
    return STREAM_COUNTS.map((count) => {
      const list = samples.get(count)!;
      const cpu = median(list.map((s) => s.cpuPerOp));
      const busy = list.filter((s) => s.busy).length;
      const lost = list.reduce((sum, s) => sum + s.lost, 0);
      const stray = list.reduce((sum, s) => sum + s.stray, 0);
      return {
        what: `API reply with ${count} open window streams of other visitors on its site, ${CONNECTIONS} connections, ${name} (CPU ms/reply; baseline: none open; target ratio ≤ 1.2)`,
        value: cpu,
        unit: 'ms',
        baseline: none,
        ratio: cpu / none,
        p50Ms: median(list.map((s) => s.p50)),
        p99Ms: median(list.map((s) => s.p99)),
        cpuMsPerOp: cpu,
        note: joinNotes(
          `${Math.round(median(list.map((s) => s.perSecond)))} replies/s; idle with the streams open: ${Math.round(median(list.map((s) => s.idleCpuPerSecond)))} ms CPU/s`,
          busy ? `machine busy in ${busy} of ${list.length} rounds` : '',
          lost ? `${lost} streams closed during the runs` : '',
          stray ? `${stray} events reached other visitors' streams` : '',
        ),
      };
    });
  } finally {
    await service?.stop();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
