/**
 * The inbox part of `npm run bench` (issue 18's bench rows):
 *
 * 1. The inbox's first page (`GET /manage/v1/sites/{siteId}/inbox/conversations?limit=25`, a
 *    management token) on the 100,000-conversation site, beside the public list's first page
 *    (`GET /api/v1/conversations?limit=25`, an API key) in the same run, each against the bare
 *    server doing the same statements (scripts/bench/bare-server.ts: the credential lookup, the page,
 *    and for the inbox the member's read marks and unread counts). The inbox is measured without a
 *    filter and with `assignee=me`.
 * 2. Live update latency: a visitor's message, posted through the chat window's entry as a visitor
 *    would, to its `message.created` on an open inbox stream (`/manage/v1/sites/{siteId}/inbox/events`),
 *    on one instance, and on two instances over one database (the message to the first, the stream
 *    on the second) woken through Redis, and without Redis (the feed poll alone).
 *
 * The big site gets a member of its own before the first run (`prepareInbox`): an owner account with
 * a management token, one conversation in three assigned to it, and on the newest conversations a
 * few messages each with the member's read mark on every other one, so the unread counts count
 * something. The overlay is recorded in the table `bench_inbox` and made once per data set.
 */
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import { newId } from '../../server/platform/ids';
import { sha256Hex } from '../../server/platform/crypto';
import type { BenchContext } from './context';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import type { Engine } from './options';
import { BenchRow, median, summarize } from './measure';
import { compare, Contender, joinNotes } from './compare';
import { createDatabase } from './delivery';
import { fetchJson } from './load';
import { API_BASE, startBareServer, startService, RunningProcess } from './processes';
import { redisUrl } from './scaleout';
import { tlsEnv } from './read';

const CONNECTIONS = 32;
const PAGE = 25;
const MANAGE_BASE = '/manage/v1';
const MEMBER_EMAIL = 'bench-member@bench.example';
/** Bumped when the overlay's shape changes, so an older overlay is made again. */
const OVERLAY_VERSION = 'inbox-v1';
/** Newest conversations of the big site that get messages (the inbox's first pages). */
const WITH_MESSAGES = 200;
const MESSAGES_EACH = 4;
const ORIGIN = 'https://bench.example';

export interface InboxMember {
  siteId: string;
  accountId: string;
  token: string;
}

/** Runs `work` on the data set's database through the service's own runtime (migrations included). */
async function withRuntime<T>(dataset: { databaseUrl?: string; dataDir: string }, work: (rt: Awaited<ReturnType<typeof openRuntime>>) => Promise<T>) {
  const env: NodeJS.ProcessEnv = { DATA_DIR: dataset.dataDir, LOG_LEVEL: 'silent', NODE_ENV: 'production' };
  if (dataset.databaseUrl) env.DATABASE_URL = dataset.databaseUrl;
  const runtime = await openRuntime(loadConfig(env));
  try {
    return await work(runtime);
  } finally {
    await runtime.close();
  }
}

async function overlayMarker(db: Knex): Promise<string | undefined> {
  if (!(await db.schema.hasTable('bench_inbox'))) return undefined;
  const row = await db('bench_inbox').first('version');
  return row?.version as string | undefined;
}

/**
 * The big site's bench member and its token (made once per data set; a token is kept in DATA_DIR
 * and made again when the file is missing or its token is no longer live).
 */
export async function prepareInbox(dataset: Dataset, log: (m: string) => void): Promise<InboxMember> {
  const file = path.join(dataset.dataDir, 'inbox.json');
  return withRuntime(dataset, async (runtime) => {
    const db = runtime.db;
    const accounts = runtime.services.accounts;
    let account = await db('accounts').where({ email: MEMBER_EMAIL }).first('id');
    if (!account) {
      log('inbox: the big site gets its bench member');
      await accounts.registry.create(MEMBER_EMAIL, randomBytes(18).toString('base64url'));
      account = await db('accounts').where({ email: MEMBER_EMAIL }).first('id');
      await accounts.members.add({ manager: null, clientIp: null }, dataset.bigSiteId, MEMBER_EMAIL, 'owner');
    }
    const accountId = account.id as string;
    if ((await overlayMarker(db)) !== OVERLAY_VERSION) {
      log('inbox: assigning conversations and writing messages and read marks on the big site');
      await writeOverlay(db, dataset.bigSiteId, accountId);
    }
    let token: string | undefined;
    if (fs.existsSync(file)) {
      const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as InboxMember;
      const row = await db('management_tokens')
        .where({ fingerprint: sha256Hex(saved.token) })
        .first('revoked_at', 'account_id');
      if (saved.siteId === dataset.bigSiteId && row && row.revoked_at === null && row.account_id === accountId) token = saved.token;
    }
    if (!token) {
      const manager = { accountId, email: MEMBER_EMAIL, via: 'session' as const };
      token = (await accounts.tokens.create({ manager, clientIp: null }, 'bench')).token;
    }
    const member = { siteId: dataset.bigSiteId, accountId, token };
    fs.writeFileSync(file, JSON.stringify(member), { mode: 0o600 });
    return member;
  });
}

/** One conversation in three assigned to the member; messages and read marks on the newest ones. */
async function writeOverlay(db: Knex, siteId: string, accountId: string): Promise<void> {
  const ids = (await db('conversations')
    .where({ site_id: siteId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .select('id', 'created_at', 'updated_at')) as { id: string; created_at: unknown; updated_at: unknown }[];
  const assigned = ids.filter((_, i) => i % 3 === 0).map((r) => r.id);
  for (let i = 0; i < assigned.length; i += 500)
    await db('conversations')
      .whereIn('id', assigned.slice(i, i + 500))
      .update({ assignee_id: accountId });
  const newest = ids.slice(0, WITH_MESSAGES);
  await db('messages')
    .whereIn(
      'conversation_id',
      newest.map((r) => r.id),
    )
    .delete();
  await db('inbox_reads').where({ account_id: accountId }).delete();
  const messages: Record<string, unknown>[] = [];
  const reads: Record<string, unknown>[] = [];
  newest.forEach((c, n) => {
    const from = Number(c.created_at);
    const span = Math.max(1, Number(c.updated_at) - from);
    for (let i = 0; i < MESSAGES_EACH; i++) {
      const at = from + Math.floor((span * i) / MESSAGES_EACH);
      const incoming = i % 2 === 0;
      const message = {
        id: newId('msg', at),
        conversation_id: c.id,
        site_id: siteId,
        direction: incoming ? 'incoming' : 'outgoing',
        origin: incoming ? 'widget' : 'messenger',
        api_key_id: null,
        author_id: incoming ? null : accountId,
        content: `inbox bench message ${i}`,
        format: 'plain',
        created_at: at,
      };
      messages.push(message);
      // Every other conversation read up to its second message: two messages after the mark, one of them the member's own.
      if (n % 2 === 0 && i === 1)
        reads.push({ account_id: accountId, conversation_id: c.id, site_id: siteId, last_read_at: at, last_read_message_id: message.id, updated_at: at });
    }
  });
  for (let i = 0; i < messages.length; i += 200) await db('messages').insert(messages.slice(i, i + 200));
  for (let i = 0; i < reads.length; i += 200) await db('inbox_reads').insert(reads.slice(i, i + 200));
  if (!(await db.schema.hasTable('bench_inbox')))
    await db.schema.createTable('bench_inbox', (t) => {
      t.string('version', 40).notNullable();
    });
  await db('bench_inbox').delete();
  await db('bench_inbox').insert({ version: OVERLAY_VERSION });
}

const listRequest = (key: string) => () => ({ path: `${API_BASE}/conversations?limit=${PAGE}`, headers: { authorization: `Bearer ${key}` } });
const inboxRequest = (prefix: string, member: InboxMember, query: string) => () => ({
  path: `${prefix}/sites/${member.siteId}/inbox/conversations?limit=${PAGE}${query}`,
  headers: { authorization: `Bearer ${member.token}` },
});

/** The first pages, each beside the bare server doing the same statements. */
export async function runInboxPagePart(ctx: BenchContext, dataset: Dataset): Promise<BenchRow[]> {
  const engine = dataset.engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const member = await prepareInbox(dataset, ctx.log);
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: tlsEnv(ctx) });
  let bare: RunningProcess | undefined;
  const rows: BenchRow[] = [];
  try {
    if (dataset.engine === 'mysql')
      bare = await startBareServer({ databaseUrl: dataset.databaseUrl!, port: ctx.nextPort(), tlsCertFile: ctx.tls.certFile, tlsKeyFile: ctx.tls.keyFile });
    const key = keyOf(dataset, dataset.bigSiteId);
    const compiledNote = service.compiled ? '' : 'service run through tsx (no dist/: run npm run build)';
    const cases = [
      {
        name: 'public list first page (GET /api/v1/conversations?limit=25, API key)',
        service: listRequest(key),
        bare: () => ({ ...listRequest(key)(), path: `/l/conversations?limit=${PAGE}` }),
      },
      {
        name: 'inbox first page (GET /manage/v1/…/inbox/conversations?limit=25, management token)',
        service: inboxRequest(MANAGE_BASE, member, ''),
        bare: inboxRequest('/l', member, ''),
      },
      { name: 'inbox first page, assignee=me', service: inboxRequest(MANAGE_BASE, member, '&assignee=me'), bare: inboxRequest('/l', member, '&assignee=me') },
    ];
    // Each answer checked once before timing: the same page size from the service and the bare server.
    for (const which of cases) {
      const s = await fetchJson<{ data: { unreadCount?: number }[] }>(service.url, which.service());
      if (s.data.length !== PAGE) throw new Error(`${which.name}: the service answered ${s.data.length} rows, not ${PAGE}`);
      if (bare) {
        const b = await fetchJson<{ data: { unreadCount?: number }[] }>(bare.url, which.bare());
        const unread = (list: { unreadCount?: number }[]) => list.map((r) => r.unreadCount ?? 0).join(',');
        if (unread(b.data) !== unread(s.data)) throw new Error(`${which.name}: unread counts differ: service ${unread(s.data)}, bare ${unread(b.data)}`);
      }
    }
    for (const which of cases) {
      const contenders: Contender[] = [{ name: 'service', pids: [service.pid], targets: [service.url], request: which.service }];
      if (bare) contenders.push({ name: 'bare', pids: [bare.pid], targets: [bare.url], request: which.bare });
      ctx.log(`inbox on ${engine}: ${which.name}`);
      const results = await compare(ctx, contenders, CONNECTIONS, which.name);
      const s = results.get('service')!;
      const b = results.get('bare');
      rows.push({
        what: `${which.name}, 100,000-conversation site, ${CONNECTIONS} connections, ${engine}${b ? ' (baseline: bare server, same statements)' : ''}`,
        value: s.perSecond,
        unit: 'req/s',
        baseline: b?.perSecond,
        ratio: b ? s.perSecond / b.perSecond : undefined,
        p50Ms: s.p50Ms,
        p99Ms: s.p99Ms,
        cpuMsPerOp: s.cpuMsPerOp,
        peakRssMiB: s.peakRssMiB,
        note: joinNotes(
          b
            ? `bare: p50 ${b.p50Ms.toFixed(1)} ms, p99 ${b.p99Ms.toFixed(1)} ms, ${b.cpuMsPerOp.toFixed(2)} ms CPU/req; CPU ratio ${(s.cpuMsPerOp / b.cpuMsPerOp).toFixed(2)}x`
            : '',
          s.note,
          b?.note,
          compiledNote,
        ),
      });
    }
  } finally {
    await service.stop();
    await bare?.stop();
  }
  return rows;
}

// ---- Live update latency ----

interface InboxStream {
  /** Resolves with the arrival time (hrtime ms) of the first `message.created` whose data contains `marker`. */
  waitFor(marker: string, timeoutMs: number): Promise<number>;
  closed(): boolean;
  close(): void;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

/** An inbox stream of the member; resolves once the stream answered 200 and sent its first bytes. */
function openInboxStream(base: URL, member: InboxMember): Promise<InboxStream> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    let closed = false;
    let started = false;
    const waiting = new Map<string, (at: number) => void>();
    const req = https.request(
      {
        host: base.hostname,
        port: base.port,
        path: `${MANAGE_BASE}/sites/${member.siteId}/inbox/events`,
        headers: { authorization: `Bearer ${member.token}`, accept: 'text/event-stream' },
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`the inbox stream answered ${res.statusCode}`));
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = nowMs();
          if (!started) {
            started = true;
            resolve(stream);
          }
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!/^event: message\.created$/m.test(frame)) continue;
            for (const [marker, done] of waiting) {
              if (frame.includes(marker)) {
                waiting.delete(marker);
                done(at);
              }
            }
          }
        });
        res.on('close', () => {
          closed = true;
          if (!started) reject(new Error('the inbox stream ended before it sent anything'));
        });
      },
    );
    const stream: InboxStream = {
      waitFor: (marker, timeoutMs) =>
        new Promise((done, fail) => {
          const timer = setTimeout(() => {
            waiting.delete(marker);
            fail(new Error(`no message.created with ${marker} on the inbox stream within ${timeoutMs} ms`));
          }, timeoutMs);
          waiting.set(marker, (at) => {
            clearTimeout(timer);
            done(at);
          });
        }),
      closed: () => closed,
      close: () => req.destroy(),
    };
    req.on('error', (err) => (started ? (closed = true) : reject(err)));
    req.end();
  });
}

interface Visitor {
  token: string;
}

async function visitorToken(base: string, siteId: string): Promise<Visitor> {
  const answer = await fetchJson<{ data: { token: string } }>(
    base,
    { method: 'POST', path: `/window/v1/sites/${siteId}/token`, headers: { origin: ORIGIN, 'content-type': 'application/json' }, body: '{}' },
    [201],
  );
  return { token: answer.data.token };
}

/** Posts as the visitor through the window's entry; resolves when the window answered. */
function postAsVisitor(base: string, siteId: string, visitor: Visitor, content: string, n: number) {
  return fetchJson(
    base,
    {
      method: 'POST',
      path: `/window/v1/sites/${siteId}/messages`,
      headers: { authorization: `Bearer ${visitor.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content, clientMessageId: `inbox-bench-${n}` }),
    },
    [201],
  );
}

export interface LiveLatencyOptions {
  /** Messages per setup and round (the setup woken by the feed poll alone: a quarter of them, each a poll period apart). */
  messages: number;
  /** Pause between two messages (one message in flight at a time), plus a random part up to as much again. */
  gapMs: number;
}

/**
 * The pause before the next message: random, so the messages do not fall into step with a periodic
 * wake-up (a message sent just after each poll would measure the whole poll period every time).
 */
export function pauseBefore(gapMs: number, spreadMs: number, random = Math.random): number {
  return gapMs + Math.floor(random() * spreadMs);
}

/** The feed poll's period (server/inbox/live.ts). */
const POLL_MS = 1000;

/**
 * Visitor message to inbox stream: for each setup, `messages` messages one after another from a few
 * visitors (each message's clock starts before its POST), the time until the stream shows it.
 */
export async function runInboxLivePart(ctx: BenchContext, engine: Engine, opts: LiveLatencyOptions = { messages: 200, gapMs: 50 }): Promise<BenchRow[]> {
  const name = engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const database = engine === 'mysql' ? await createDatabase(ctx.options.mysqlServerUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-inbox-live-'));
  const setting = { databaseUrl: database?.url, dataDir };
  const started: RunningProcess[] = [];
  try {
    const member = await withRuntime(setting, async (runtime) => {
      const site = await runtime.services.access.createSite('Inbox live bench');
      await runtime.services.access.setAllowedOrigins(site.id, [ORIGIN]);
      const account = await runtime.services.accounts.registry.create(MEMBER_EMAIL, randomBytes(18).toString('base64url'));
      await runtime.services.accounts.members.add({ manager: null, clientIp: null }, site.id, MEMBER_EMAIL, 'owner');
      const manager = { accountId: account.id, email: MEMBER_EMAIL, via: 'session' as const };
      const token = (await runtime.services.accounts.tokens.create({ manager, clientIp: null }, 'bench')).token;
      return { siteId: site.id, accountId: account.id, token };
    });
    const redis = engine === 'mysql' ? await redisUrl() : undefined;
    type Setup = { what: string; env: Record<string, string>; instances: 1 | 2; messages: number; spreadMs: number };
    const setups: Setup[] = [{ what: 'one instance', env: {}, instances: 1, messages: opts.messages, spreadMs: opts.gapMs }];
    // Two processes share one database only on MariaDB (SQLite is one process's file).
    if (engine === 'mysql') {
      if (redis)
        setups.push({
          what: 'two instances woken through Redis (message to one, stream on the other)',
          env: { REDIS_URL: redis },
          instances: 2,
          messages: opts.messages,
          spreadMs: opts.gapMs,
        });
      setups.push({
        what: 'two instances without Redis (message to one, stream on the other: the feed poll)',
        env: {},
        instances: 2,
        messages: Math.max(1, Math.round(opts.messages / 4)),
        spreadMs: POLL_MS,
      });
    }
    const rows: BenchRow[] = [];
    let n = 0;
    for (const setup of setups) {
      const env = { ...tlsEnv(ctx), ...setup.env };
      const writer = await startService({ ...setting, port: ctx.nextPort(), env });
      started.push(writer);
      const reader = setup.instances === 2 ? await startService({ ...setting, port: ctx.nextPort(), env }) : writer;
      if (reader !== writer) started.push(reader);
      const samples: number[] = [];
      const answered: number[] = [];
      let busy = 0;
      let lost = 0;
      try {
        const visitors = await Promise.all(Array.from({ length: 4 }, () => visitorToken(writer.url, member.siteId)));
        for (let round = 1; round <= ctx.options.rounds; round++) {
          const stream = await openInboxStream(new URL(reader.url), member);
          try {
            if ((await ctx.quiet()) !== '') busy++;
            const runId = randomBytes(4).toString('hex');
            for (let i = 0; i < setup.messages; i++) {
              const marker = `inbox-live-${runId}-${i}`;
              const arrived = stream.waitFor(marker, 10_000);
              const t0 = nowMs();
              await postAsVisitor(writer.url, member.siteId, visitors[i % visitors.length], `hello ${marker}`, n++);
              answered.push(nowMs() - t0);
              samples.push((await arrived) - t0);
              await new Promise((resolve) => setTimeout(resolve, pauseBefore(opts.gapMs, setup.spreadMs)));
            }
            if (stream.closed()) lost++;
          } finally {
            stream.close();
          }
          const s = summarize(samples);
          ctx.log(`  inbox live ${name}, ${setup.what}, round ${round}: p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms over ${s.n}`);
        }
      } finally {
        for (const p of [writer, reader]) await p.stop();
      }
      const s = summarize(samples);
      rows.push({
        what: `visitor message (chat window) to an open inbox stream, ${setup.what}, ${name}`,
        value: s.p50,
        unit: 'ms p50',
        p50Ms: s.p50,
        p99Ms: s.p99,
        note: joinNotes(
          `${s.n} messages one at a time, ${opts.gapMs}–${opts.gapMs + setup.spreadMs} ms apart; the window answered the POST in ${median(answered).toFixed(1)} ms (median)`,
          busy ? `machine busy in ${busy} of ${ctx.options.rounds} rounds` : '',
          lost ? `the stream closed in ${lost} rounds` : '',
        ),
      });
    }
    return rows;
  } finally {
    for (const p of started) await p.stop();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
