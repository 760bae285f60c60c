/**
 * `npx tsx scripts/bench/read-cost.ts`: what one read costs the service, measured so that other load
 * on the machine does not move it much, and what a read-only load writes or grows in MariaDB.
 *
 * The reads (issue 28's targets) go one at a time over one keep-alive connection: GET messages of
 * the 30,000-message conversation and of conversations across sites, the public list's first page
 * (`state=open&updatedAfter=`), the inbox's first page with and without `assignee=me` and with `q`.
 * Per read: the service's CPU (utime + stime from /proc, 10 ms ticks, over `--requests` reads).
 *
 * Rounds (`--rounds`): the same reads again and again, and between rounds, on MariaDB, the row count
 * of every table, the keys' last_used_at writes, InnoDB's history list length and the server's
 * handler counters per read (global counters: other work on the same server shows up in them).
 *
 * Options: --messages=100000 (data-set size, scripts/bench/dataset.ts), --requests=2000, --rounds=1,
 * --only=messages-long,list,... (the case names below), --database-url=mysql://root@127.0.0.1:3306.
 * BENCH_NODE_ARGS passes flags to the service (e.g. --cpu-prof --cpu-prof-dir=…).
 */
import https from 'node:https';
import mysql from 'mysql2/promise';
import { mysqlDataset, shapeFor, keyOf } from './dataset';
import { prepareInbox } from './inbox';
import { API_BASE, startService } from './processes';
import { localDatabasePid, processCpuMs } from './measure';

const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const messages = Number(flag('messages') ?? 100_000);
const requests = Number(flag('requests') ?? 2000);
const rounds = Number(flag('rounds') ?? 1);
const only = flag('only')?.split(',');
const serverUrl = (flag('database-url') ?? 'mysql://root@127.0.0.1:3306').replace(/\/+$/, '');
const log = (m: string) => process.stderr.write(`${m}\n`);

const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });

function get(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(base + path, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

const HANDLER_COUNTERS = [
  'Handler_read_key',
  'Handler_read_next',
  'Handler_read_prev',
  'Handler_read_rnd_next',
  'Handler_write',
  'Handler_update',
  'Com_select',
  'Com_update',
  'Questions',
];

async function main() {
  const dataset = await mysqlDataset(serverUrl, shapeFor(messages), { rebuild: false, log });
  const member = await prepareInbox(dataset, log);
  const admin = await mysql.createConnection({ uri: dataset.databaseUrl!, supportBigNumbers: true, bigNumberStrings: false });
  const port = 18_000 + Math.floor(Math.random() * 2000);
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port });
  try {
    const updatedAfter = new Date(dataset.createdTo - 7 * 24 * 3600 * 1000).toISOString();
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const inbox = `/manage/v1/sites/${member.siteId}/inbox/conversations?limit=25`;
    const spread = dataset.sampleConversations;
    const cases: { name: string; request: (n: number) => { path: string; headers: Record<string, string> } }[] = [
      {
        name: 'messages-long',
        request: () => ({
          path: `${API_BASE}/conversations/${dataset.longConversation.id}/messages?limit=25`,
          headers: bearer(keyOf(dataset, dataset.longConversation.siteId)),
        }),
      },
      {
        name: 'messages-spread',
        request: (n: number) => {
          const c = spread[(n * 7919) % spread.length];
          return { path: `${API_BASE}/conversations/${c.id}/messages?limit=25`, headers: bearer(keyOf(dataset, c.siteId)) };
        },
      },
      {
        name: 'list',
        request: () => ({
          path: `${API_BASE}/conversations?state=open&updatedAfter=${encodeURIComponent(updatedAfter)}&limit=25`,
          headers: bearer(keyOf(dataset, dataset.bigSiteId)),
        }),
      },
      { name: 'inbox', request: () => ({ path: inbox, headers: bearer(member.token) }) },
      { name: 'inbox-me', request: () => ({ path: `${inbox}&assignee=me`, headers: bearer(member.token) }) },
      { name: 'inbox-search', request: () => ({ path: `${inbox}&q=bench`, headers: bearer(member.token) }) },
    ].filter((c) => !only || only.includes(c.name));

    for (const c of cases) {
      const r = c.request(0);
      const res = await get(service.url, r.path, r.headers);
      if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${res.body.slice(0, 300)}`);
      log(`${c.name}: 200, ${(JSON.parse(res.body) as { data: unknown[] }).data.length} rows`);
    }

    const tables = ((await admin.query('SHOW TABLES')) as unknown as [Record<string, string>[]])[0].map((r) => Object.values(r)[0]);
    const counts = async () => {
      const out: Record<string, number> = {};
      for (const t of tables) out[t] = Number(((await admin.query(`SELECT COUNT(*) AS n FROM \`${t}\``)) as unknown as [{ n: number }[]])[0][0].n);
      return out;
    };
    const status = async () => {
      const [rows] = (await admin.query(
        `SHOW GLOBAL STATUS WHERE Variable_name IN (${HANDLER_COUNTERS.map(() => '?').join(',')})`,
        HANDLER_COUNTERS,
      )) as unknown as [{ Variable_name: string; Value: string }[]];
      return Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
    };
    const historyLength = async () => {
      const [rows] = (await admin.query('SHOW ENGINE INNODB STATUS')) as unknown as [{ Status: string }[]];
      return Number(/History list length (\d+)/.exec(rows[0].Status)?.[1]);
    };
    const keysTouched = async (since: number) =>
      Number(((await admin.query('SELECT COUNT(*) AS n FROM api_keys WHERE last_used_at >= ?', [since])) as unknown as [{ n: number }[]])[0][0].n);

    const databasePid = localDatabasePid();
    const before = await counts();
    const results: string[] = [];
    for (let round = 1; round <= rounds; round++) {
      const started = Date.now();
      const line: string[] = [`round ${round}`];
      for (const c of cases) {
        for (let i = 0; i < 50; i++) {
          const r = c.request(i);
          await get(service.url, r.path, r.headers);
        }
        const s0 = await status();
        const cpu0 = processCpuMs(service.pid)!;
        const dbCpu0 = databasePid ? processCpuMs(databasePid) : undefined;
        const t0 = performance.now();
        for (let i = 0; i < requests; i++) {
          const r = c.request(i);
          const res = await get(service.url, r.path, r.headers);
          if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${res.body.slice(0, 300)}`);
        }
        const wall = performance.now() - t0;
        const cpu = (processCpuMs(service.pid)! - cpu0) / requests;
        const dbCpu = dbCpu0 === undefined ? undefined : (processCpuMs(databasePid!)! - dbCpu0) / requests;
        const s1 = await status();
        const perRead = HANDLER_COUNTERS.map((k) => `${k.replace('Handler_', '')} ${((s1[k] - s0[k]) / requests).toFixed(1)}`).join(', ');
        line.push(
          `${c.name}: ${cpu.toFixed(3)} ms CPU/req, ${(wall / requests).toFixed(2)} ms wall/req, MariaDB ${dbCpu?.toFixed(3) ?? '?'} ms CPU/req (all its clients); per read (global): ${perRead}`,
        );
      }
      line.push(`history list length ${await historyLength()}; keys whose last_used_at moved this round: ${await keysTouched(started)}`);
      results.push(line.join('\n  '));
      log(line.join('\n  '));
    }
    const after = await counts();
    const grew = tables.filter((t) => after[t] !== before[t]).map((t) => `${t}: ${before[t]} -> ${after[t]}`);
    results.push(`tables whose row count changed: ${grew.length ? grew.join(', ') : 'none'}`);
    process.stdout.write(results.join('\n') + '\n');
  } finally {
    await service.stop();
    await admin.end();
    agent.destroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
