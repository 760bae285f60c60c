/**
 * The delivery part of `npm run bench` (issue 8): event delivery to one local HTTPS receiver
 * (receiver.ts, its own process), each figure beside a bare baseline measured in the same run.
 *
 *   - bare loop: this process signs (HMAC-SHA256, as the worker does) and POSTs event-sized bodies
 *     to the receiver with node:https, keep-alive, 32 in flight;
 *   - throughput: N events written through the service's own code (messages service, one
 *     transaction each, outbox included) while no worker runs, then `npm run worker` is started;
 *     the rate is taken from the delivery log (first attempt's start to last attempt's end) once
 *     every delivery row is `delivered`;
 *   - event to first attempt: replies POSTed through the API at a fixed rate, with the worker inside
 *     the service and with it in its own process; the receiver's arrival minus the event's createdAt.
 *
 * Every phase gets its own database (and DATA_DIR), so a backlog left by one never slows the next.
 * Alone: `npx tsx scripts/bench/delivery.ts [--full]` (quick unless --full; DATABASE_URL picks MariaDB).
 */
import { execFile } from 'node:child_process';
import { randomBytes, createHmac } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import { loadConfig } from '../../server/config';
import { openRuntime, Runtime } from '../../server/runtime';
import { BenchRow, formatTable, localDatabasePid, median, processCpuMs, processMemoryMiB, sampleProcess, summarize, waitForQuiet } from './measure';
import { entryPoint, REPO_ROOT, serviceEnv, startService, startWorker } from './processes';
import { startReceiver, Arrival, Receiver } from './receiver';

export interface DeliveryBenchContext {
  databaseUrl?: string;
  rounds: number;
  quick: boolean;
  log: (s: string) => void;
  /** How long to wait for a quiet machine before each timed phase (default 60 s). */
  quietWaitMs?: number;
}

/** Requests the bare loop keeps in flight (the issue's baseline). */
const BARE_IN_FLIGHT = 32;
/** The worker's per-address cap as the measured worker gets it (WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS or its default), a second bare row. */
const PER_ADDRESS_CAP = loadConfig({
  WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS: process.env.WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS,
  WEBHOOK_CONCURRENCY: process.env.WEBHOOK_CONCURRENCY,
}).webhookMaxInFlightPerAddress;
/** Open conversations the events are spread over, so writers do not queue on one row lock. */
const CONVERSATIONS = 16;
/** A delivery run that makes no progress for this long is reported as stalled, not waited for. */
const STALL_MS = 60_000;
/** The longest a throughput run may take (today's worker needs 12 minutes for 20,000); what was delivered by then is measured. */
const THROUGHPUT_CAP_MS = { quick: 3 * 60_000, full: 10 * 60_000 };
const LATENCY_RATES = (process.env.BENCH_DELIVERY_RATES ?? '200,20').split(',').map(Number);
/**
 * How long the service and the worker sit idle before the measured replies, as a quiet site does
 * between bursts: longer than the worker's poll takes to back off (1 s), so the figures include
 * the first events after a quiet spell (a measurement started right after the warm-up hid them).
 */
const IDLE_BEFORE_MS = 3_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export async function runDeliveryBench(ctx: DeliveryBenchContext): Promise<BenchRow[]> {
  const events = ctx.quick ? 2_000 : 20_000;
  const engine = ctx.databaseUrl ? 'MariaDB' : 'SQLite';
  const receiver = await startReceiver();
  try {
    const bare: BareResult[] = [];
    const bareAtCap: BareResult[] = [];
    const service: ThroughputResult[] = [];
    // Alternated, so a change in the machine's load touches both sides alike.
    const rounds = process.env.BENCH_DELIVERY_THROUGHPUT === 'false' ? 0 : ctx.rounds;
    for (let round = 1; round <= rounds; round++) {
      ctx.log(`delivery round ${round}/${ctx.rounds}: bare sign + POST loop, ${events} requests`);
      bare.push(await bareLoop(receiver, events, round, ctx.quietWaitMs));
      ctx.log(`  ${Math.round(bare[bare.length - 1].perSecond)} deliveries/s`);
      // The same loop held to the worker's per-address cap: what the cap alone allows.
      bareAtCap.push(await bareLoop(receiver, events, round + ctx.rounds, ctx.quietWaitMs, PER_ADDRESS_CAP));
      ctx.log(`  ${Math.round(bareAtCap[bareAtCap.length - 1].perSecond)} deliveries/s at ${PER_ADDRESS_CAP} in flight`);
      ctx.log(`delivery round ${round}/${ctx.rounds}: ${events} events through the worker (${engine})`);
      service.push(await throughput(ctx, receiver, events));
      ctx.log(
        `  ${Math.round(service[service.length - 1].perSecond)} deliveries/s (${Math.round(service[service.length - 1].arrivalsPerSecond)} arrivals/s at the receiver)`,
      );
    }
    const rows = rounds ? throughputRows(bare, bareAtCap, service, events, engine) : [];
    if (process.env.BENCH_DELIVERY_LATENCY === 'false') return rows;
    const durationMs = ctx.quick ? 6_000 : 20_000;
    // BENCH_DELIVERY_MODES (comma-separated) measures some modes alone.
    const only = process.env.BENCH_DELIVERY_MODES?.split(',');
    const modes = (['embedded', 'separate'] as LatencyMode[]).filter((m) => !only || only.includes(m));
    if (only && !only.includes('separate-redis')) ctx.log('the separate worker woken through Redis is not measured (BENCH_DELIVERY_MODES)');
    else if (await answers(REDIS_URL)) modes.push('separate-redis');
    else ctx.log(`no Redis at ${REDIS_URL}: the separate worker is measured with the adaptive poll only`);
    for (const mode of modes) {
      for (const rate of LATENCY_RATES) {
        ctx.log(`event to first attempt: ${rate} events/s for ${seconds(durationMs)}, ${mode} worker`);
        const result = await latency(ctx, receiver, mode, rate, durationMs);
        ctx.log(`  p50 ${Math.round(result.p50Ms)} ms, p99 ${Math.round(result.p99Ms)} ms${result.backlogGrows ? ', backlog grows' : ''}`);
        rows.push(latencyRow(result, mode, rate, durationMs, engine));
      }
    }
    return rows;
  } finally {
    await receiver.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// The bare baseline

interface BareResult {
  perSecond: number;
  cpuMsPerOp: number;
  connections: number;
  quiet: boolean;
}

/** An event body of the size and shape the service sends (a message.created of a short reply). */
function eventBody(id: string): string {
  const at = new Date().toISOString();
  const conversation = {
    id: 'conv_01m82c8ectn5wveaf7bn3y95qd',
    state: 'open',
    visitorId: 'visitor-42',
    createdAt: at,
    updatedAt: at,
    lastMessageAt: at,
    closedAt: null,
  };
  const message = {
    id: 'msg_01m82c8ectn5wveaf7bn3y95qe',
    conversationId: conversation.id,
    direction: 'outgoing',
    origin: 'api',
    apiKeyId: 'key_01m82bk3aj03rxk0rnc2sdxfrw',
    content: 'Thanks for writing! Your order left our warehouse this morning.',
    format: 'plain',
    attachments: [],
    createdAt: at,
  };
  return JSON.stringify({ id, event: 'message.created', createdAt: at, workspaceKey: 'ws_01m82c8ec8k0tm35z5cmcdh9ed', data: { conversation, message } });
}

/** The headers the worker sends, signed the same way (docs/events.md, "What arrives"). */
function signed(secret: string, id: string, body: string): Record<string, string> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(body)),
    'User-Agent': 'chat-service-webhooks/1',
    'X-Service-Event': 'message.created',
    'X-Service-Delivery': id,
    'X-Service-Attempt': '1',
    'X-Service-Timestamp': timestamp,
    'X-Service-Signature': `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`,
  };
}

function postTo(agent: https.Agent, port: number, headers: Record<string, string>, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', servername: 'localhost', port, path: '/hooks/bare', method: 'POST', agent, headers }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`the receiver answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function bareLoop(receiver: Receiver, count: number, round: number, quietWaitMs?: number, inFlight = BARE_IN_FLIGHT): Promise<BareResult> {
  const quiet = await waitForQuiet({ maxWaitMs: quietWaitMs });
  await receiver.reset();
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  const agent = new https.Agent({ keepAlive: true, maxSockets: inFlight, ca: receiver.ca });
  let sent = 0;
  const send = (total: number) => async () => {
    while (sent < total) {
      const id = `message.created:bare-${round}-${sent++}`;
      const body = eventBody(id);
      await postTo(agent, receiver.port, signed(secret, id, body), body);
    }
  };
  const lanes = (total: number) => Promise.all(Array.from({ length: inFlight }, send(total)));
  // Untimed warm-up: the connections are open and the code is compiled, as in a worker that runs.
  const warmUp = inFlight * 4;
  await lanes(warmUp);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await lanes(warmUp + count);
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  agent.destroy();
  const stats = await receiver.stats();
  if (stats.distinct !== warmUp + count) throw new Error(`bare loop: the receiver saw ${stats.distinct} of ${warmUp + count} requests`);
  return { perSecond: count / (elapsedMs / 1000), cpuMsPerOp: (cpu.user + cpu.system) / 1000 / count, connections: stats.connections, quiet };
}

// ---------------------------------------------------------------------------------------------
// A fresh database, site, key, conversations and event address for one phase

interface Fixture {
  databaseUrl?: string;
  dataDir: string;
  runtime: Runtime;
  siteId: string;
  key: { id: string; key: string };
  conversations: string[];
  close(): Promise<void>;
}

/** A new database on the server of `serverUrl` (named after its database), dropped by `drop`. */
export async function createDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const server = new URL(serverUrl);
  const name = `${server.pathname.slice(1) || 'chat_bench'}_delivery_${randomBytes(4).toString('hex')}`.slice(0, 64);
  const admin = knexFactory({
    client: 'mysql2',
    connection: {
      host: server.hostname,
      port: Number(server.port || 3306),
      user: decodeURIComponent(server.username),
      password: decodeURIComponent(server.password),
    },
    pool: { min: 0, max: 1 },
  });
  try {
    await admin.raw('CREATE DATABASE ??', [name]);
  } catch (err) {
    await admin.destroy();
    throw err;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      try {
        await admin.raw('DROP DATABASE IF EXISTS ??', [name]);
      } finally {
        await admin.destroy();
      }
    },
  };
}

/** `npm run admin -- webhook set` against the phase's database, as an operator sets the address. */
function setEventAddress(databaseUrl: string | undefined, dataDir: string, siteId: string, url: string): Promise<void> {
  const { args } = entryPoint('dist/server/cli/admin.js', 'server/cli/admin.ts');
  const env = serviceEnv({ databaseUrl, dataDir, port: 0, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [...args, 'webhook', 'set', '--site', siteId, '--url', url, '--json'], { cwd: REPO_ROOT, env }, (err, _stdout, stderr) =>
      err ? reject(new Error(`webhook set failed: ${stderr || err.message}`)) : resolve(),
    ),
  );
}

/**
 * The set-up the operator would do: a site and key (server/access, as the tests do), visitors'
 * conversations (the chat window's path), then the event address (the CLI). The conversations
 * come before the address, so their own events are not delivered.
 */
async function openFixture(ctx: DeliveryBenchContext, receiver: Receiver): Promise<Fixture> {
  const database = ctx.databaseUrl ? await createDatabase(ctx.databaseUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-delivery-'));
  const env: NodeJS.ProcessEnv = { DATA_DIR: dataDir, LOG_LEVEL: 'silent', NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
  if (database) env.DATABASE_URL = database.url;
  let runtime: Runtime | undefined;
  const close = async () => {
    await runtime?.close();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    runtime = await openRuntime(loadConfig(env));
    const site = await runtime.services.access.createSite('Delivery bench');
    const key = await runtime.services.access.createKey(site.id, ['conversations:read', 'conversations:write']);
    const conversations: string[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) {
      conversations.push((await runtime.services.window.chat.visitorSay(site.id, `visitor-${i}`, 'Where is my order?')).conversation.id);
    }
    await setEventAddress(database?.url, dataDir, site.id, receiver.url('/hooks/chat'));
    return { databaseUrl: database?.url, dataDir, runtime, siteId: site.id, key, conversations, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** What the service and the worker need to deliver to the receiver. */
const deliveryEnv = (receiver: Receiver) => ({ WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });

/** Waits until the receiver has `count` distinct events, or no new one came for stallMs, or the deadline passed. */
async function waitForArrivals(
  receiver: Receiver,
  count: number,
  opts: { stallMs: number; deadline?: number },
): Promise<{ complete: boolean; distinct: number }> {
  let complete = false;
  receiver
    .whenCount(count)
    .then(() => (complete = true))
    .catch(() => undefined); // the receiver stopped: the loop below finds that out through stats()
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    for (let i = 0; i < 10 && !complete; i++) await sleep(100);
    if (complete) return { complete, distinct: count };
    const { distinct } = await receiver.stats();
    if (distinct !== last) {
      last = distinct;
      lastChange = Date.now();
    }
    if (Date.now() - lastChange > opts.stallMs || (opts.deadline !== undefined && Date.now() > opts.deadline)) return { complete: false, distinct };
  }
}

// ---------------------------------------------------------------------------------------------
// Throughput of the separate worker

interface ThroughputResult {
  perSecond: number;
  cpuMsPerOp: number;
  /** Requests per second at the receiver, first to last arrival (a check on the log's rate). */
  arrivalsPerSecond: number;
  /** The local database server's CPU over the same window, per delivery (NaN when it is not local). */
  databaseCpuMsPerOp: number;
  peakRssMiB: number;
  /** RSS at 25, 50, 75 and 100 % of the events delivered. */
  rssMiB: number[];
  connections: number;
  requests: number;
  delivered: number;
  failed: number;
  complete: boolean;
  writeMs: number;
  quiet: boolean;
}

/** `count` replies through the messages service (its transaction writes the message, the outbox event and the delivery row). */
async function writeEvents(fixture: Fixture, count: number): Promise<void> {
  let next = 0;
  const writer = async (conversationId: string) => {
    while (next < count) {
      next++;
      await fixture.runtime.services.messages.reply(fixture.siteId, conversationId, {
        direction: 'outgoing',
        origin: 'api',
        apiKeyId: fixture.key.id,
        content: `Thanks for writing! Your order left our warehouse this morning (${next}).`,
        format: 'plain',
        files: [],
      });
    }
  };
  await Promise.all(fixture.conversations.map(writer));
}

/** The delivery rows by state, and the span of the attempts in the delivery log (the worker's own clock). */
async function deliveryLog(fixture: Fixture) {
  const db = fixture.runtime.db;
  const states: { status: string; n: number | string }[] = await db('deliveries').select('status').count({ n: '*' }).groupBy('status');
  const byState = Object.fromEntries(states.map((r) => [r.status, Number(r.n)]));
  const span = await db('delivery_attempts').first(db.raw('min(started_at) as first, max(started_at + duration_ms) as last'));
  return { delivered: byState.delivered ?? 0, failed: byState.failed ?? 0, firstMs: Number(span?.first), lastMs: Number(span?.last) };
}

async function throughput(ctx: DeliveryBenchContext, receiver: Receiver, count: number): Promise<ThroughputResult> {
  const fixture = await openFixture(ctx, receiver);
  try {
    const writeStarted = Date.now();
    await writeEvents(fixture, count);
    const writeMs = Date.now() - writeStarted;
    ctx.log(`  ${count} events written in ${seconds(writeMs)} with no worker running`);
    const quiet = await waitForQuiet({ maxWaitMs: ctx.quietWaitMs });
    await receiver.reset();

    const worker = await startWorker({ databaseUrl: fixture.databaseUrl, dataDir: fixture.dataDir, port: 0, env: deliveryEnv(receiver), settleMs: 0 });
    try {
      const memory = sampleProcess(worker.pid);
      // CPU from the first delivery on: the worker's start (tsx, migrations check) is not delivery work.
      let cpuAtFirst: number | undefined;
      const databasePid = ctx.databaseUrl ? localDatabasePid() : undefined;
      let databaseCpuAtFirst: number | undefined;
      let firstArrivalAt = NaN;
      let lastArrivalAt = NaN;
      receiver
        .whenCount(count)
        .then(() => (lastArrivalAt = performance.now()))
        .catch(() => undefined);
      receiver
        .whenCount(1)
        .then(() => {
          firstArrivalAt = performance.now();
          cpuAtFirst = processCpuMs(worker.pid);
          databaseCpuAtFirst = databasePid === undefined ? undefined : processCpuMs(databasePid);
        })
        .catch(() => undefined);
      const rssMiB: number[] = [];
      [0.25, 0.5, 0.75, 1].forEach((share, i) =>
        receiver
          .whenCount(Math.max(1, Math.round(count * share)))
          .then(() => (rssMiB[i] = processMemoryMiB(worker.pid)?.rssMiB ?? NaN))
          .catch(() => undefined),
      );
      const arrived = await waitForArrivals(receiver, count, { stallMs: STALL_MS, deadline: Date.now() + THROUGHPUT_CAP_MS[ctx.quick ? 'quick' : 'full'] });
      // The receiver's own count, as a check on the log's: first arrival to the last one.
      const arrivalsPerSecond = arrived.complete ? (count - 1) / ((lastArrivalAt - firstArrivalAt) / 1000) : NaN;
      if (!arrived.complete && processCpuMs(worker.pid) === undefined) throw new Error('`npm run worker` exited during the throughput run');
      // The last answers are in; their rows are marked delivered a moment later.
      let log = await deliveryLog(fixture);
      for (let i = 0; i < 100 && log.delivered + log.failed < count; i++) {
        await sleep(100);
        log = await deliveryLog(fixture);
      }
      const cpuMs = (processCpuMs(worker.pid) ?? NaN) - (cpuAtFirst ?? NaN);
      const databaseCpuMs = (databasePid === undefined ? NaN : (processCpuMs(databasePid) ?? NaN)) - (databaseCpuAtFirst ?? NaN);
      const sampled = memory.stop();
      const stats = await receiver.stats();
      return {
        perSecond: log.delivered / ((log.lastMs - log.firstMs) / 1000),
        cpuMsPerOp: cpuMs / Math.max(1, log.delivered),
        databaseCpuMsPerOp: databaseCpuMs / Math.max(1, log.delivered),
        arrivalsPerSecond,
        peakRssMiB: sampled.peakRssMiB,
        rssMiB: [0, 1, 2, 3].map((i) => rssMiB[i] ?? (i === 3 ? sampled.rssMiB : NaN)),
        connections: stats.connections,
        requests: stats.requests,
        delivered: log.delivered,
        failed: log.failed,
        complete: arrived.complete && log.delivered === count,
        writeMs,
        quiet,
      };
    } finally {
      await worker.stop();
    }
  } finally {
    await fixture.close();
  }
}

function throughputRows(bare: BareResult[], bareAtCap: BareResult[], service: ThroughputResult[], count: number, engine: string): BenchRow[] {
  const barePerSecond = median(bare.map((b) => b.perSecond));
  const perSecond = median(service.map((s) => s.perSecond));
  const busy = [...bare, ...service].some((r) => !r.quiet) ? '; measured on a busy machine (it never went quiet before the run)' : '';
  const last = service[service.length - 1];
  const incomplete = service.filter((s) => !s.complete).length;
  const rss = last.rssMiB.map((v) => (Number.isFinite(v) ? Math.round(v) : '-')).join(' / ');
  const growing = last.rssMiB[3] - last.rssMiB[0] > Math.max(32, 0.2 * last.rssMiB[0]);
  const rounds =
    service.length > 1
      ? `; rounds: ${service.map((s) => Math.round(s.perSecond)).join(', ')} vs bare ${bare.map((b) => Math.round(b.perSecond)).join(', ')}`
      : '';
  return [
    {
      what: 'delivery: bare sign + POST loop (node:https, keep-alive, 32 in flight)',
      value: barePerSecond,
      unit: 'deliveries/s',
      cpuMsPerOp: median(bare.map((b) => b.cpuMsPerOp)),
      note: `${count} requests over ${bare[bare.length - 1].connections} connections; CPU of the loop's process${busy}`,
    },
    {
      what: `delivery: the same loop at ${PER_ADDRESS_CAP} in flight (the worker's per-address cap)`,
      value: median(bareAtCap.map((b) => b.perSecond)),
      unit: 'deliveries/s',
      cpuMsPerOp: median(bareAtCap.map((b) => b.cpuMsPerOp)),
      note: `${count} requests over ${bareAtCap[bareAtCap.length - 1].connections} connections: the cap alone does not limit the rate`,
    },
    {
      what: `delivery: ${count.toLocaleString('en-US')} events to one address, \`npm run worker\` (${engine} outbox and delivery log)`,
      value: perSecond,
      unit: 'deliveries/s',
      baseline: barePerSecond,
      ratio: perSecond / barePerSecond,
      cpuMsPerOp: median(service.map((s) => s.cpuMsPerOp)),
      peakRssMiB: Math.max(...service.map((s) => s.peakRssMiB)),
      note:
        `${last.requests} requests over ${last.connections} connections; worker CPU from its first delivery` +
        (Number.isFinite(last.databaseCpuMsPerOp)
          ? `; database server CPU ${median(service.map((s) => s.databaseCpuMsPerOp)).toFixed(2)} ms per delivery`
          : '') +
        (last.failed ? `; ${last.failed} failed` : '') +
        (incomplete
          ? `; ${incomplete} run(s) stopped before every event was delivered (stalled, or over the time cap; last: ${last.delivered} delivered)`
          : '') +
        rounds +
        busy,
    },
    {
      what: `delivery: worker RSS after ${count.toLocaleString('en-US')} deliveries`,
      value: last.rssMiB[3],
      unit: 'MiB',
      peakRssMiB: last.peakRssMiB,
      note: `RSS at 25 / 50 / 75 / 100 % delivered: ${rss} MiB (${growing ? 'growing' : 'flat'})${last.complete ? '' : `; stopped at ${last.delivered} delivered, RSS then`}`,
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// Event to first attempt

interface LatencyResult {
  p50Ms: number;
  p99Ms: number;
  /** Events that never arrived within the wait: their latency counts as the time waited, so p50/p99 are lower bounds. */
  missing: number;
  created: number;
  refused: number;
  /** From the first reply sent to the last one answered. */
  windowMs: number;
  /** Events committed (reply answered) but not yet at the receiver, at 25/50/75 % of the sending time and when every reply was answered. */
  backlog: number[];
  backlogGrows: boolean;
  cpuMsPerOp: number;
  replyP50Ms: number;
  replyP99Ms: number;
  /** The receiver's view: attempts, and the TLS connections they came over. */
  requests: number;
  connections: number;
  quiet: boolean;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** A keep-alive client of the service's API that posts replies; resolves with the HTTP status. */
function replyClient(serviceUrl: string, dataDir: string, key: string) {
  // The service made its own certificate for localhost and 127.0.0.1 under DATA_DIR on start.
  const agent = new https.Agent({ keepAlive: true, maxSockets: 64, ca: fs.readFileSync(path.join(dataDir, 'tls', 'localhost.crt')) });
  const base = new URL(serviceUrl);
  let n = 0;
  return {
    reply(conversationId: string): Promise<number> {
      const body = JSON.stringify({ content: `Thanks for writing! Your order left our warehouse this morning (${++n}).`, format: 'plain' });
      return new Promise((resolve) => {
        const req = https.request(
          {
            host: base.hostname,
            port: base.port,
            path: `/api/v1/conversations/${conversationId}/messages`,
            method: 'POST',
            agent,
            headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', () => resolve(0));
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}

const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + (processCpuMs(pid) ?? 0), 0);

interface Offered {
  /** Replies answered 201: each committed one message.created event. */
  created: number;
  refused: number;
  replyMs: number[];
  answeredAt: number[];
  /** From the first reply sent to the last one answered. */
  windowMs: number;
  /** Events committed but not yet at the receiver, at 25/50/75 % of the sending time and when every reply was answered. */
  backlog: number[];
}

/**
 * Replies at `rate` a second for `durationMs`, open loop: each leaves at its time whether or not
 * earlier ones were answered, as visitors and agents do not wait for the service.
 */
async function offerReplies(
  client: ReturnType<typeof replyClient>,
  conversations: string[],
  rate: number,
  durationMs: number,
  receiver: Receiver,
): Promise<Offered> {
  const offered: Offered = { created: 0, refused: 0, replyMs: [], answeredAt: [], windowMs: 0, backlog: [] };
  const sampleBacklog = async (slot: number) => {
    const answered = offered.created;
    offered.backlog[slot] = answered - (await receiver.stats()).distinct;
  };
  const samplers = [1, 2, 3].map((quarter) => setTimeout(() => void sampleBacklog(quarter - 1).catch(() => undefined), (durationMs * quarter) / 4));
  const sends: Promise<void>[] = [];
  const started = Date.now();
  const total = Math.round((rate * durationMs) / 1000);
  for (let i = 0; i < total; i++) {
    const wait = started + (i * 1000) / rate - Date.now();
    if (wait > 0) await sleep(wait);
    const sent = Date.now();
    sends.push(
      client.reply(conversations[i % conversations.length]).then((status) => {
        if (status !== 201) return void offered.refused++;
        offered.created++;
        offered.replyMs.push(Date.now() - sent);
        offered.answeredAt.push(Date.now());
      }),
    );
  }
  await Promise.all(sends);
  offered.windowMs = Date.now() - started;
  samplers.forEach(clearTimeout);
  await sampleBacklog(3);
  return offered;
}

/**
 * Arrival minus the event's createdAt for every event that arrived. Events still missing are taken
 * to be the last ones answered (the worker takes the oldest due first) and count with the time they
 * have waited so far, a lower bound.
 */
function firstAttemptLatencies(arrivals: Arrival[], offered: Offered, waitedUntil: number): { samples: number[]; missing: number } {
  const samples = arrivals.filter(([, createdAt]) => Number.isFinite(createdAt)).map(([, createdAt, arrivedAt]) => arrivedAt - createdAt);
  const missing = Math.max(0, offered.created - arrivals.length);
  const answered = [...offered.answeredAt].sort((a, b) => a - b);
  for (const at of answered.slice(answered.length - missing)) samples.push(waitedUntil - at);
  return { samples, missing };
}

/**
 * Where the worker runs: inside the service (woken in-process), as `npm run worker` learning of
 * new events by the adaptive poll, or as `npm run worker` woken through Redis pub/sub (REDIS_URL
 * set for both processes, as a deployment with several processes runs).
 */
type LatencyMode = 'embedded' | 'separate' | 'separate-redis';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Whether something accepts connections at the URL's host and port within a second. */
function answers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 6379) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function latency(ctx: DeliveryBenchContext, receiver: Receiver, mode: LatencyMode, rate: number, durationMs: number): Promise<LatencyResult> {
  const fixture = await openFixture(ctx, receiver);
  const processes: { pid: number; stop(): Promise<void> }[] = [];
  try {
    const env: Record<string, string> = { ...deliveryEnv(receiver), EMBEDDED_WORKER: mode === 'embedded' ? 'true' : 'false' };
    if (mode === 'separate-redis') env.REDIS_URL = REDIS_URL;
    const service = await startService({ databaseUrl: fixture.databaseUrl, dataDir: fixture.dataDir, port: await freePort(), env });
    processes.push(service);
    if (mode !== 'embedded') processes.push(await startWorker({ databaseUrl: fixture.databaseUrl, dataDir: fixture.dataDir, port: 0, env, settleMs: 0 }));
    const client = replyClient(service.url, fixture.dataDir, fixture.key.key);
    try {
      // Warm-up: one reply per conversation, delivered, so the worker is up and the code paths are hot.
      await receiver.reset();
      await Promise.all(fixture.conversations.map((c) => client.reply(c)));
      if (!(await waitForArrivals(receiver, fixture.conversations.length, { stallMs: STALL_MS })).complete)
        throw new Error(`${mode} worker: the warm-up events never arrived`);
      const quiet = await waitForQuiet({ maxWaitMs: ctx.quietWaitMs });
      await sleep(IDLE_BEFORE_MS);
      await receiver.reset();

      const pids = processes.map((p) => p.pid);
      const cpuBefore = cpuOf(pids);
      const offered = await offerReplies(client, fixture.conversations, rate, durationMs, receiver);
      const drainMs = ctx.quick ? 5_000 : 10_000;
      await waitForArrivals(receiver, offered.created, { stallMs: drainMs, deadline: Date.now() + drainMs });
      const waitedUntil = Date.now();
      const cpuMs = cpuOf(pids) - cpuBefore;
      const { samples, missing } = firstAttemptLatencies(await receiver.arrivals(), offered, waitedUntil);
      const { requests, connections } = await receiver.stats();
      const summary = summarize(samples);
      const replies = summarize(offered.replyMs);
      const [, half, , end] = [0, 1, 2, 3].map((i) => offered.backlog[i] ?? NaN);
      return {
        p50Ms: summary.p50,
        p99Ms: summary.p99,
        missing,
        created: offered.created,
        refused: offered.refused,
        windowMs: offered.windowMs,
        backlog: offered.backlog,
        // More than a second of events behind once every reply was answered, and more than half-way: it does not keep up.
        backlogGrows: end > rate && end > half,
        cpuMsPerOp: cpuMs / Math.max(1, offered.created),
        replyP50Ms: replies.p50,
        replyP99Ms: replies.p99,
        requests,
        connections,
        quiet,
      };
    } finally {
      client.close();
    }
  } finally {
    for (const p of processes.reverse()) await p.stop();
    await fixture.close();
  }
}

function latencyRow(r: LatencyResult, mode: LatencyMode, rate: number, durationMs: number, engine: string): BenchRow {
  const notes = [
    `offered ${rate}/s for ${seconds(durationMs)}: ${r.created} replies answered in ${seconds(r.windowMs)} (reply p50 ${Math.round(r.replyP50Ms)} ms, p99 ${Math.round(r.replyP99Ms)} ms)`,
    `backlog at 25/50/75/100 %: ${[0, 1, 2, 3].map((i) => r.backlog[i] ?? '?').join(' / ')} events${r.backlogGrows ? ' (grows without bound)' : ''}`,
  ];
  notes.push(`${r.requests} attempts over ${r.connections} connections`);
  if (r.missing) notes.push(`${r.missing} not delivered by the end of the wait: p50/p99 are lower bounds`);
  if (r.refused) notes.push(`${r.refused} replies refused or failed`);
  notes.push(mode === 'embedded' ? 'CPU: the service (with its worker) per event' : 'CPU: service + worker per event');
  if (!r.quiet) notes.push('measured on a busy machine');
  return {
    what: `event to first attempt, ${rate} events/s, ${{ embedded: 'worker inside the service', separate: 'separate `npm run worker` (no Redis: poll and probe)', 'separate-redis': 'separate `npm run worker` woken through Redis' }[mode]} (${engine})`,
    value: r.p50Ms,
    unit: 'ms p50',
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    cpuMsPerOp: r.cpuMsPerOp,
    note: notes.join('; '),
  };
}

if (require.main === module) {
  runDeliveryBench({
    databaseUrl: process.env.DATABASE_URL,
    rounds: Number(process.env.BENCH_ROUNDS ?? 1),
    quick: !process.argv.includes('--full'),
    log: (s) => console.error(s),
  })
    .then((rows) => console.log(formatTable(rows)))
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
