/**
 * The visitor part of `npm run bench`: the work issue 26 added to two of the chat window's hot paths.
 *
 * 1. A visitor's message (`POST /window/v1/sites/{siteId}/messages`, the window's own request with a
 *    `clientMessageId`) now runs the agent-alerts step in its transaction (the site's members with
 *    their settings, and the conversation's check scheduled). Measured on a site whose 3 members are
 *    away with alerts `all`, beside the same on a site whose 3 members chose `none` (the step then
 *    schedules nothing), alternated in one service process. Every visitor wrote once before the
 *    timed runs, so the rows are a conversation's later messages; a start's emails are counted in
 *    test/window/visitor-statements.test.ts.
 * 2. Each open window asks `GET …/availability` once a minute (the site's hours, the visitor, the
 *    members' presence), with and without REDIS_URL (presence then reads Redis, and so does the
 *    window's rate limit); the cost of 1,000 open windows is computed from the per-request figure.
 *
 * It needs nothing the service lacked before issue 26 (commit 7ed82ec): against such a build the
 * settings are not set (there are none) and the availability rows are skipped when the route
 * answers 404, so the lead can run it from an older worktree with scripts/bench copied in.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import type { BenchContext } from './context';
import type { Engine } from './options';
import type { BenchRow } from './measure';
import { compare, joinNotes } from './compare';
import { createDatabase } from './delivery';
import { LoadRequest, timeOne } from './load';
import { ORIGIN, inParallel, newVisitor, token } from './live';
import { startService } from './processes';
import { tlsEnv } from './read';
import { redisUrl } from './scaleout';

const CONNECTIONS = 8;
/** Visitors of each site the messages and availability requests are spread over. */
const VISITORS = 100;
const MEMBERS = 3;
/** The longest wait a member can choose: no scheduled check falls due during the runs, so the rows hold only the message's own cost. */
const WAIT_MINUTES = 240;
/** Open windows in the per-second cost, each asking once a minute (the panel's EVERY_MS). */
const OPEN_WINDOWS = 1_000;
/** Window tokens live 10 minutes (server/window/tokens.ts): renewed well before, while the runs go on. */
const RENEW_MS = 4 * 60_000;
/**
 * The window's hourly message quota per client address (1,000 by default) raised out of the way, as
 * serviceEnv raises the rate limit: every request comes from 127.0.0.1. It is still spent on each message.
 */
const QUOTA_ENV = { VISITOR_MESSAGES_PER_HOUR_PER_ADDRESS: '1000000000' };

type Mode = 'all' | 'none';

interface BenchVisitor {
  credential: string;
  token: string;
}

interface Site {
  id: string;
  mode: Mode;
  visitors: BenchVisitor[];
}

const window = (siteId: string, rest: string) => `/window/v1/sites/${siteId}${rest}`;

/** Makes the two sites, each with MEMBERS members; answers whether this build has members' alert settings at all. */
async function prepare(env: NodeJS.ProcessEnv): Promise<{ sites: Omit<Site, 'visitors'>[]; alertSettings: boolean }> {
  const runtime = await openRuntime(loadConfig(env));
  try {
    const s = runtime.services;
    // A build from before issue 26 has no alerts: both sites then measure the same path.
    const alerts = (s as Partial<typeof s>).agentAlerts?.service;
    const sites: Omit<Site, 'visitors'>[] = [];
    for (const mode of ['all', 'none'] as const) {
      const site = await s.access.createSite(`Visitor bench (${mode})`);
      await s.access.setAllowedOrigins(site.id, [ORIGIN]);
      for (let i = 0; i < MEMBERS; i++) {
        const email = `member${i}-${mode}@bench.example`;
        const account = await s.accounts.registry.create(email, randomBytes(18).toString('base64url'));
        await s.accounts.members.add({ manager: null, clientIp: null }, site.id, email, i === 0 ? 'owner' : 'agent');
        const actor = { manager: { accountId: account.id, email, via: 'session' as const }, clientIp: null };
        await alerts?.setSetting(actor, site.id, { mode, waitMinutes: WAIT_MINUTES });
      }
      sites.push({ id: site.id, mode });
    }
    return { sites, alertSettings: alerts !== undefined };
  } finally {
    await runtime.close();
  }
}

/** Renews every visitor's token on the service `base()` names now, every RENEW_MS, until stopped. */
function keepTokensFresh(base: () => string, sites: Site[], log: (m: string) => void): () => void {
  const timer = setInterval(() => {
    for (const site of sites)
      void inParallel(site.visitors.length, async (i) => {
        site.visitors[i].token = (await token(base(), site.id, site.visitors[i].credential)).token;
      }).catch((err) => log(`visitor: renewing window tokens failed: ${(err as Error).message}`));
  }, RENEW_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** The n-th request of connection c goes to one of the site's visitors, each in turn. */
const visitorOf = (site: Site, c: number, n: number) => site.visitors[(c * 37 + n) % site.visitors.length];

function message(site: Site, runId: string): (c: number, n: number) => LoadRequest {
  // `n` is new in every round (load.ts), so no round measures the window's replay of a message it
  // already has (answered 200, not 201).
  return (c, n) => ({
    method: 'POST',
    path: window(site.id, '/messages'),
    headers: { authorization: `Bearer ${visitorOf(site, c, n).token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content: `visitor bench ${runId} message ${n} from connection ${c}`, clientMessageId: `${runId}-${site.mode}-${c}-${n}` }),
  });
}

function availability(site: Site): (c: number, n: number) => LoadRequest {
  return (c, n) => ({ path: window(site.id, '/availability'), headers: { authorization: `Bearer ${visitorOf(site, c, n).token}` } });
}

export async function runVisitorPart(ctx: BenchContext, engine: Engine): Promise<BenchRow[]> {
  const name = engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const database = engine === 'mysql' ? await createDatabase(ctx.options.mysqlServerUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-visitor-'));
  const env: NodeJS.ProcessEnv = { DATA_DIR: dataDir, LOG_LEVEL: 'silent' };
  if (database) env.DATABASE_URL = database.url;
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  let stopRenewing = () => {};
  const rows: BenchRow[] = [];
  try {
    const prepared = await prepare(env);
    service = await startService({ databaseUrl: database?.url, dataDir, port: ctx.nextPort(), env: { ...tlsEnv(ctx), ...QUOTA_ENV } });
    const compiledNote = service.compiled ? '' : 'service run through tsx (no dist/: run npm run build)';
    const buildNote = prepared.alertSettings ? '' : 'this build has no alerts step (before issue 26): both sites run the same path';
    ctx.log(`visitor on ${name}: ${2 * VISITORS} visitors write their first message`);
    const sites: Site[] = [];
    for (const site of prepared.sites) {
      const visitors = await inParallel(VISITORS, (i) => newVisitor(service!.url, site.id, i));
      const tokens = await inParallel(VISITORS, (i) => token(service!.url, site.id, visitors[i].credential));
      sites.push({ ...site, visitors: tokens.map((t) => ({ credential: t.visitorCredential, token: t.token })) });
    }
    stopRenewing = keepTokensFresh(() => service!.url, sites, ctx.log);
    const all = sites[0];

    // 1. Visitor messages: alerts `all` and `none` alternated in each round.
    const runId = randomBytes(4).toString('hex');
    const label = `visitor messages on ${name}`;
    const results = await compare(
      ctx,
      sites.map((site) => ({ name: site.mode, pids: [service!.pid], targets: [service!.url], request: message(site, runId), okStatuses: [201] })),
      CONNECTIONS,
      label,
    );
    const a = results.get('all')!;
    const n = results.get('none')!;
    const what = (mode: Mode) =>
      `visitor message (POST /window/v1/…/messages, a conversation's later messages), ${VISITORS} visitors of one site, its ${MEMBERS} members away with alerts \`${mode}\`, ${CONNECTIONS} connections, ${name}`;
    rows.push({
      what: what('all'),
      value: a.perSecond,
      unit: 'req/s',
      p50Ms: a.p50Ms,
      p99Ms: a.p99Ms,
      cpuMsPerOp: a.cpuMsPerOp,
      peakRssMiB: a.peakRssMiB,
      note: joinNotes(a.note, buildNote, compiledNote),
    });
    rows.push({
      what: `${what('none')} (baseline: alerts \`all\`, same service, alternated)`,
      value: n.perSecond,
      unit: 'req/s',
      baseline: a.perSecond,
      ratio: n.perSecond / a.perSecond,
      p50Ms: n.p50Ms,
      p99Ms: n.p99Ms,
      cpuMsPerOp: n.cpuMsPerOp,
      peakRssMiB: n.peakRssMiB,
      note: joinNotes(
        prepared.alertSettings
          ? `\`all\` costs ${(a.cpuMsPerOp - n.cpuMsPerOp).toFixed(2)} ms CPU/message more than \`none\``
          : `the two sites differ by ${(a.cpuMsPerOp - n.cpuMsPerOp).toFixed(2)} ms CPU/message on one path: the run's noise`,
        n.note,
        buildNote,
        compiledNote,
      ),
    });

    // 2. Availability, without and then with REDIS_URL (one process at a time: SQLite is one process's file).
    const probe = await timeOne(service.url, availability(all)(0, 0));
    if (probe.status === 404) {
      rows.push({
        what: `availability (GET /window/v1/…/availability), ${name}`,
        value: NaN,
        unit: '',
        note: 'skipped: the route answers 404 (a build before issue 26)',
      });
      return rows;
    }
    if (probe.status !== 200) throw new Error(`availability answered ${probe.status}: ${probe.body.slice(0, 300)}`);
    const redis = await redisUrl();
    const setups: { what: string; env: Record<string, string> }[] = [{ what: 'no REDIS_URL (presence in process)', env: {} }];
    if (redis) setups.push({ what: 'REDIS_URL (presence and the rate limit in Redis)', env: { REDIS_URL: redis } });
    else ctx.log('visitor: no Redis answers at REDIS_URL or 127.0.0.1:6379; the availability row with Redis is left out');
    for (const setup of setups) {
      if (setup.env.REDIS_URL) {
        await service.stop();
        service = await startService({ databaseUrl: database?.url, dataDir, port: ctx.nextPort(), env: { ...tlsEnv(ctx), ...QUOTA_ENV, ...setup.env } });
      }
      const r = (
        await compare(
          ctx,
          [{ name: 'availability', pids: [service.pid], targets: [service.url], request: availability(all) }],
          CONNECTIONS,
          `availability on ${name}, ${setup.what}`,
        )
      ).get('availability')!;
      const perSecond = (OPEN_WINDOWS / 60) * r.cpuMsPerOp;
      rows.push({
        what: `availability (GET /window/v1/…/availability), ${setup.what}, ${CONNECTIONS} connections, ${name}`,
        value: r.perSecond,
        unit: 'req/s',
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        cpuMsPerOp: r.cpuMsPerOp,
        peakRssMiB: r.peakRssMiB,
        note: joinNotes(
          `${OPEN_WINDOWS.toLocaleString('en-US')} open windows asking once a minute: ${perSecond.toFixed(1)} ms CPU/s (computed: ${OPEN_WINDOWS}/60 × the CPU per request)`,
          r.note,
          compiledNote,
        ),
      });
    }
    return rows;
  } finally {
    stopRenewing();
    await service?.stop();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
