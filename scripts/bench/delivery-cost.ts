/**
 * What one delivery costs the worker, counted rather than timed, so it holds on a busy machine:
 *
 *   npx tsx scripts/bench/delivery-cost.ts [--events=3000] [--sqlite]
 *   npx tsx scripts/bench/delivery-cost.ts --profile=.bench/profiles   # a .cpuprofile of the delivery window alone
 *
 * N replies are written through the messages service with no worker running, then the event
 * worker (services.ts's wiring, default policy) runs in this process against the bench receiver
 * (its own process) until every delivery is delivered. Printed per delivery: the statements the
 * worker sent (Knex `query` events, by kind), this process's CPU (process.cpuUsage over the
 * delivery window), and on MariaDB the server's CPU spent on this run's connections alone: the
 * run connects as a user of its own and reads its CPU_TIME from USER_STATISTICS (`userstat`,
 * switched on for the run and back off), so other work on the server does not count.
 */
import { randomBytes } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { createHmac } from 'node:crypto';
import knexFactory from 'knex';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import { deliveryWorkerFor } from '../../server/services';
import { startReceiver } from './receiver';

const arg = (name: string, fallback: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const EVENTS = Number(arg('events', '3000'));
const SQLITE = process.argv.includes('--sqlite');
const PROFILE_DIR = arg('profile', '');
const SERVER = process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/';
const WAIT_MARK = 'delivery_cost_wait';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The kind of a statement: its verb and first table, so a run's statements group into a few lines. */
function kindOf(sql: string): string {
  const s = sql.slice(0, 200).trim().replace(/\s+/g, ' ');
  const verb = s.split(' ')[0].toLowerCase();
  const table = /(?:from|into|update) [`"]?(\w+)/i.exec(s)?.[1] ?? '';
  const extra = /for update/i.test(s) ? ' for update' : '';
  return `${verb} ${table}${extra}`.trim();
}

/**
 * The bare loop of delivery.ts in this process, for scale: sign and POST `count` event-sized bodies
 * at 4 in flight (the worker's per-address cap); its CPU per POST.
 */
async function bareCpuMsPerPost(receiver: Awaited<ReturnType<typeof startReceiver>>, count: number): Promise<number> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: receiver.ca });
  const body = JSON.stringify({ id: 'message.created:x', event: 'message.created', createdAt: new Date().toISOString(), data: { text: 'x'.repeat(600) } });
  const secret = randomBytes(32).toString('base64url');
  let sent = 0;
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers = {
        'Content-Type': 'application/json',
        'Content-Length': String(Buffer.byteLength(body)),
        'X-Service-Delivery': `bare-${sent}`,
        'X-Service-Timestamp': timestamp,
        'X-Service-Signature': `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`,
      };
      const req = https.request(
        { host: '127.0.0.1', servername: 'localhost', port: receiver.port, path: '/hooks/bare', method: 'POST', agent, headers },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const lanes = async (total: number) =>
    Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < total) {
          sent++;
          await post();
        }
      }),
    );
  await lanes(200);
  const before = process.cpuUsage();
  await lanes(200 + count);
  const cpu = process.cpuUsage(before);
  agent.destroy();
  return (cpu.user + cpu.system) / 1000 / count;
}

async function main() {
  const name = `chat_cost_${randomBytes(4).toString('hex')}`;
  const user = name.slice(0, 32);
  const password = randomBytes(12).toString('hex');
  const admin = SQLITE ? undefined : knexFactory({ client: 'mysql2', connection: SERVER, pool: { min: 0, max: 1 } });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'delivery-cost-'));
  const receiver = await startReceiver();
  let url: string | undefined;
  if (admin) {
    await admin.raw('CREATE DATABASE ??', [name]);
    await admin.raw(`CREATE USER ??@'%' IDENTIFIED BY ?`, [user, password]);
    await admin.raw(`GRANT ALL ON ??.* TO ??@'%'`, [name, user]);
    const u = new URL(SERVER);
    u.username = user;
    u.password = password;
    u.pathname = `/${name}`;
    url = u.toString();
  }
  const env: NodeJS.ProcessEnv = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    NODE_ENV: 'production',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_CA_FILE: receiver.caFile,
    ...(url ? { DATABASE_URL: url } : {}),
  };
  const runtime = await openRuntime(loadConfig(env));
  try {
    const { services } = runtime;
    const site = await services.access.createSite('Delivery cost');
    const key = await services.access.createKey(site.id, ['conversations:read', 'conversations:write']);
    const conversations: string[] = [];
    for (let i = 0; i < 16; i++) conversations.push((await services.window.chat.visitorSay(site.id, `visitor-${i}`, 'Where is my order?')).conversation.id);
    await services.webhooks.setEndpoint(site.id, receiver.url('/hooks/chat'));
    let next = 0;
    await Promise.all(
      conversations.map(async (conversationId) => {
        while (next < EVENTS) {
          next++;
          await services.messages.reply(site.id, conversationId, {
            direction: 'outgoing',
            origin: 'api',
            apiKeyId: key.id,
            content: `Thanks for writing! Your order left our warehouse this morning (${next}).`,
            format: 'plain',
            files: [],
          });
        }
      }),
    );
    await receiver.reset();

    const kinds = new Map<string, number>();
    let statements = 0;
    runtime.db.on('query', (q: { sql: string }) => {
      if (q.sql.includes(WAIT_MARK)) return; // this script's own look at the deliveries
      statements++;
      const k = kindOf(q.sql);
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    });
    const userCpu = async () => {
      if (!admin) return NaN;
      const [rows] = await admin.raw('SELECT CPU_TIME AS cpu FROM information_schema.USER_STATISTICS WHERE USER = ?', [user]);
      return Number(rows[0]?.cpu ?? 0) * 1000; // seconds to ms
    };
    if (admin) {
      await admin.raw('SET GLOBAL userstat = 1');
      await admin.raw('FLUSH USER_STATISTICS');
    }
    const inspector = PROFILE_DIR ? new Session() : undefined;
    if (inspector) {
      inspector.connect();
      await inspector.post('Profiler.enable');
      await inspector.post('Profiler.start');
      if (process.env.HEAP_SAMPLING)
        await inspector.post('HeapProfiler.startSampling', {
          samplingInterval: 4096,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
    }
    const dbBefore = await userCpu();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const worker = deliveryWorkerFor(services, { info() {}, warn() {}, error: console.error, debug() {} } as never, { logRetention: false });
    worker.start();
    await receiver.whenCount(EVENTS);
    // The results of the last attempts are committed a moment after their answers.
    for (;;) {
      const [{ [WAIT_MARK]: n }] = await runtime
        .db('deliveries')
        .where('status', 'delivered')
        .count({ [WAIT_MARK]: '*' });
      if (Number(n) >= EVENTS) break;
      await sleep(20);
    }
    const elapsedMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    const dbMs = (await userCpu()) - dbBefore;
    if (inspector) {
      const { profile } = await inspector.post('Profiler.stop');
      fs.mkdirSync(PROFILE_DIR, { recursive: true });
      if (process.env.HEAP_SAMPLING) {
        const heap = await inspector.post('HeapProfiler.stopSampling');
        fs.writeFileSync(path.join(PROFILE_DIR, `delivery-cost-${Date.now()}.heapprofile`), JSON.stringify(heap.profile));
        type HeapNode = { selfSize: number; children: HeapNode[] };
        const total = (n: HeapNode): number => n.selfSize + n.children.reduce((sum, c) => sum + total(c), 0);
        console.log(`allocated (sampled) KiB/delivery: ${(total(heap.profile.head as HeapNode) / 1024 / EVENTS).toFixed(1)}`);
      }
      const file = path.join(PROFILE_DIR, `delivery-cost-${Date.now()}.cpuprofile`);
      fs.writeFileSync(file, JSON.stringify(profile));
      console.log(`profile: ${file}`);
      inspector.disconnect();
    }
    await worker.stop();
    const stats = await receiver.stats();
    const perDelivery = (x: number) => (x / EVENTS).toFixed(4);
    if (inspector) {
      inspector.connect();
      await inspector.post('Profiler.enable');
      await inspector.post('Profiler.start');
    }
    const bare = await bareCpuMsPerPost(receiver, EVENTS);
    if (inspector) {
      const { profile } = await inspector.post('Profiler.stop');
      const file = path.join(PROFILE_DIR, `bare-loop-${Date.now()}.cpuprofile`);
      fs.writeFileSync(file, JSON.stringify(profile));
      console.log(`profile of the bare loop: ${file}`);
      inspector.disconnect();
    }
    console.log(`engine: ${SQLITE ? 'sqlite' : 'mariadb'}; ${EVENTS} deliveries in ${(elapsedMs / 1000).toFixed(1)} s (wall time: load-dependent)`);
    console.log(`receiver: ${stats.distinct} distinct, ${stats.requests} requests over ${stats.connections} connections`);
    console.log(
      `worker CPU ms/delivery: ${perDelivery((cpu.user + cpu.system) / 1000)} (bare sign + POST loop at 4 in flight, same process: ${bare.toFixed(4)})`,
    );
    console.log(`database CPU ms/delivery (this run's user only): ${perDelivery(dbMs)}`);
    console.log(`statements/delivery: ${perDelivery(statements)} (${statements} in all)`);
    for (const [k, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`  ${k}: ${n} (${perDelivery(n)}/delivery)`);
  } finally {
    await runtime.close();
    await receiver.stop();
    if (admin) {
      await admin.raw('SET GLOBAL userstat = 0').catch(() => undefined);
      await admin.raw('DROP DATABASE IF EXISTS ??', [name]);
      await admin.raw(`DROP USER IF EXISTS ??@'%'`, [user]);
      await admin.destroy();
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
