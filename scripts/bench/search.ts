/**
 * The inbox search's part of `npm run bench` (issue 25, item 2): the first page (26 rows, as the
 * service asks for a page of 25) of `q=<common word>` and of `q=<rare word>` (and of two words between
 * them, for information) on a site whose search
 * read model holds `--messages` message entries (1,000,000 by default) over a tenth as many
 * conversations, on MariaDB (and with `--engine=sqlite|both` on SQLite, at most 100,000 entries).
 * The service's figure is the page as the conversation store finds it (server/conversations/store.ts
 * following the search's plan, server/search/plan.ts: windows of the walk, or the full-text index),
 * sent through Knex; the bare baseline sends the very statements of that plan (captured from the
 * service's first run, SQL and values) with plain mysql2 on one connection, or better-sqlite3.
 * Sequential requests, p50 and p95 of each.
 *
 * The data set (a database of its own, `chat_bench_search_<messages>`, kept between runs) holds
 * what the query reads: conversations and their search entries (the `messages` rows themselves are
 * not read by a search and are not made). The common word is in about one message in five, the
 * rare one in 20 messages of the whole site. Rows go in without the full-text index, which is made
 * afterwards as the migration makes it (its empty stopword list).
 */
import mysql from 'mysql2/promise';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import path from 'node:path';
import fs from 'node:fs';
import { newId } from '../../server/platform/ids';
import { createConversationStore } from '../../server/conversations/store';
import { conversationFilter } from '../../server/conversations/filter';
import type { BenchContext } from './context';
import { BenchRow, percentile } from './measure';
import { benchDir } from './dataset';
import { registerSqliteFunctions } from '../../server/db/fulltext';

const COMMON = 'order';
const RARE = 'zebrafish';
const RARE_COUNT = 20;
/**
 * Words of the vocabulary between the two, where the plan costs most (docs/performance.md): at
 * 1,000,000 entries `wfa` is in one conversation of 17 (the walk goes on after the first window),
 * `wkk` in one of 85 (the first window sends it to the index). Reported, not part of the target.
 */
const MIDDLE = [
  ['middle word (1 conversation in 17)', 'wfa'],
  ['middle word (1 conversation in 85)', 'wkk'],
] as const;
const ROWS_PER_INSERT = 4000;
const MEMBER = 'usr_00000000000000000000bench';
const WARMUP = 20;
const SAMPLES = 200;
const DAY = 24 * 3600_000;

function seeded(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A message of 8 words from a 20,000-word vocabulary (skewed to its start, as language is), with the common word in one of five. */
function messageText(random: () => number): string {
  const words: string[] = [];
  for (let i = 0; i < 8; i++) words.push(`w${Math.floor(20_000 * random() ** 3).toString(36)}`);
  if (random() < 0.2) words[Math.floor(random() * 8)] = COMMON;
  return words.join(' ');
}

/**
 * The bench's site, the same on both engines: `messages / 10` conversations over a year (every
 * other one open), and `messages` entries dealt round-robin to them (so each conversation's
 * entries span the whole range), the rare word in RARE_COUNT of them spread evenly.
 */
function benchRows(messages: number) {
  const siteId = newId('ws', Date.UTC(2026, 0, 1));
  const count = Math.max(1, Math.floor(messages / 10));
  const from = Date.UTC(2025, 10, 1);
  const conversations: unknown[][] = [];
  for (let i = 0; i < count; i++) {
    const created = from + Math.floor((i / count) * 365 * DAY);
    const open = i % 2 === 0;
    conversations.push([
      newId('conv', created),
      siteId,
      `vis_bench_${i}`,
      open ? 'open' : 'closed',
      open ? 1 : null,
      created,
      created + 60_000,
      created + 60_000,
      open ? null : created + 60_000,
    ]);
  }
  function* entries(): Generator<unknown[]> {
    const random = seeded(25);
    const rareAt = new Set(Array.from({ length: RARE_COUNT }, (_, i) => Math.floor(((i + 0.5) / RARE_COUNT) * messages)));
    for (let m = 0; m < messages; m++) {
      const conv = conversations[m % count];
      const text = rareAt.has(m) ? `${messageText(random)} ${RARE}` : messageText(random);
      yield [siteId, conv[0], 'message', newId('msg', (conv[5] as number) + m), text, conv[5]];
    }
  }
  return { siteId, conversations, entries };
}

async function ensureDataset(ctx: BenchContext, serverUrl: string, messages: number): Promise<{ url: string; siteId: string }> {
  const name = `chat_bench_search_${messages}`;
  const admin = await mysql.createConnection({ uri: serverUrl });
  await admin.query(`CREATE DATABASE IF NOT EXISTS \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  await admin.end();
  const url = `${serverUrl}/${name}`;
  const conn = await mysql.createConnection({ uri: url });
  try {
    const [marker] = (await conn.query('SELECT site_id FROM bench_search').catch(() => [[]])) as unknown as [{ site_id: string }[]];
    if (marker.length && !ctx.options.rebuild) return { url, siteId: marker[0].site_id };
    const started = Date.now();
    ctx.log(`search: building ${messages.toLocaleString('en-US')} message entries in ${name}`);
    // The service's own schema, migrations included.
    const runtime = await openRuntime(loadConfig({ DATA_DIR: '/tmp', DATABASE_URL: url, LOG_LEVEL: 'silent', NODE_ENV: 'production' }));
    await runtime.close();
    await conn.query('DROP TABLE IF EXISTS bench_search');
    await conn.query('DELETE FROM search_entries');
    await conn.query('DELETE FROM conversations');
    await conn.query('DELETE FROM sites');
    const [fulltext] = (await conn.query("SHOW INDEX FROM search_entries WHERE Key_name = 'search_entries_body'")) as unknown as [unknown[]];
    if (fulltext.length) await conn.query('ALTER TABLE search_entries DROP INDEX search_entries_body');
    const { siteId, conversations, entries } = benchRows(messages);
    await conn.query('INSERT INTO sites (id, name, created_at) VALUES (?, ?, ?)', [siteId, 'search bench', Date.now()]);
    for (let i = 0; i < conversations.length; i += ROWS_PER_INSERT) {
      await conn.query('INSERT INTO conversations (id, site_id, visitor_id, state, open_marker, created_at, updated_at, last_message_at, closed_at) VALUES ?', [
        conversations.slice(i, i + ROWS_PER_INSERT),
      ]);
    }
    let batch: unknown[][] = [];
    let m = 0;
    for (const entry of entries()) {
      batch.push(entry);
      if (batch.length === ROWS_PER_INSERT) {
        await conn.query('INSERT INTO search_entries (site_id, conversation_id, kind, source_id, body, created_at) VALUES ?', [batch]);
        batch = [];
      }
      if (++m % 200_000 === 0) ctx.log(`search: ${m.toLocaleString('en-US')} entries`);
    }
    if (batch.length) await conn.query('INSERT INTO search_entries (site_id, conversation_id, kind, source_id, body, created_at) VALUES ?', [batch]);
    ctx.log('search: building the full-text index');
    // As the migration builds it (server/db/fulltext.ts): with the empty stopword list. By copying
    // the table: MariaDB 10.11 builds an empty index in place over a table whose earlier full-text
    // index was dropped (it keeps the hidden FTS_DOC_ID column), and every search would find nothing.
    await conn.query('SET SESSION innodb_ft_user_stopword_table = ?', [`${name}/search_entries_stopwords`]);
    await conn.query('ALTER TABLE search_entries ADD FULLTEXT INDEX search_entries_body (body), ALGORITHM=COPY');
    const [[{ n }]] = (await conn.query("SELECT COUNT(*) AS n FROM search_entries WHERE MATCH(body) AGAINST ('+zebrafish*' IN BOOLEAN MODE)")) as unknown as [
      { n: number }[],
    ];
    if (Number(n) !== RARE_COUNT) throw new Error(`search bench: the full-text index finds ${n} entries of the rare word, not ${RARE_COUNT}`);
    await conn.query('ANALYZE TABLE conversations, search_entries');
    await conn.query('CREATE TABLE bench_search (site_id VARCHAR(40) NOT NULL, built_seconds INT NOT NULL)');
    await conn.query('INSERT INTO bench_search VALUES (?, ?)', [siteId, Math.round((Date.now() - started) / 1000)]);
    ctx.log(`search: built in ${Math.round((Date.now() - started) / 1000)} s`);
    return { url, siteId };
  } finally {
    await conn.end();
  }
}

async function timed(run: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const t = process.hrtime.bigint();
    await run();
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return samples.sort((a, b) => a - b);
}

/** At most this many entries on SQLite (one writer; its FTS5 triggers index each row as it goes in). */
const SQLITE_MAX_ENTRIES = 100_000;

// better-sqlite3 ships no types: the little used here.
interface SqliteDatabase {
  prepare(sql: string): { run(...values: unknown[]): unknown; all(...values: unknown[]): unknown[]; get(...values: unknown[]): unknown };
  function(name: string, options: { deterministic: boolean }, fn: (...args: never[]) => unknown): unknown;
  pragma(text: string): unknown;
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}
const Sqlite = require('better-sqlite3') as new (file: string, opts?: { readonly?: boolean }) => SqliteDatabase;

/** The same site on SQLite, in .bench/chat_bench_search_<entries>_sqlite (the service's own schema, FTS5 triggers included). */
async function ensureSqliteDataset(ctx: BenchContext, messages: number): Promise<{ dataDir: string; siteId: string }> {
  const dataDir = path.join(benchDir(), `chat_bench_search_${messages}_sqlite`);
  const file = path.join(dataDir, 'chat.sqlite3');
  if (fs.existsSync(file) && !ctx.options.rebuild) {
    const db = new Sqlite(file, { readonly: true });
    const marker = db.prepare("SELECT name FROM sqlite_master WHERE name = 'bench_search'").get()
      ? (db.prepare('SELECT site_id FROM bench_search').get() as { site_id: string })
      : undefined;
    db.close();
    if (marker) return { dataDir, siteId: marker.site_id };
  }
  const started = Date.now();
  ctx.log(`search: building ${messages.toLocaleString('en-US')} message entries on SQLite in ${dataDir}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const runtime = await openRuntime(loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', NODE_ENV: 'production' }));
  await runtime.close();
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const { siteId, conversations, entries } = benchRows(messages);
  db.prepare('INSERT INTO sites (id, name, created_at) VALUES (?, ?, ?)').run(siteId, 'search bench', Date.now());
  const insertConversation = db.prepare(
    'INSERT INTO conversations (id, site_id, visitor_id, state, open_marker, created_at, updated_at, last_message_at, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const insertEntry = db.prepare('INSERT INTO search_entries (site_id, conversation_id, kind, source_id, body, created_at) VALUES (?, ?, ?, ?, ?, ?)');
  db.transaction(() => {
    for (const row of conversations) insertConversation.run(...row);
    for (const row of entries()) insertEntry.run(...row);
  })();
  db.prepare('CREATE TABLE bench_search (site_id TEXT NOT NULL, built_seconds INTEGER NOT NULL)').run();
  db.prepare('INSERT INTO bench_search VALUES (?, ?)').run(siteId, Math.round((Date.now() - started) / 1000));
  db.close();
  ctx.log(`search: SQLite built in ${Math.round((Date.now() - started) / 1000)} s`);
  return { dataDir, siteId };
}

/** A captured statement of the service's plan, as Knex sent it. */
interface Statement {
  sql: string;
  bindings: unknown[];
}

/** The rows of the page a statement gives: those of a list statement (the member's read marks beside them); a window's lower end gives none. */
const listed = (s: Statement, rows: unknown[]) => (s.sql.includes('read_at') ? rows.length : 0);

/**
 * Times the first page of each word: the service's (the conversation store, through Knex) beside
 * `bare`, which sends the statements the service sent for that page. The rows found must agree.
 */
async function measureWords(
  ctx: BenchContext,
  runtime: Awaited<ReturnType<typeof openRuntime>>,
  siteId: string,
  engine: string,
  messages: number,
  bare: (plan: Statement[]) => Promise<number>,
): Promise<BenchRow[]> {
  const store = createConversationStore(runtime.db);
  const rows: BenchRow[] = [];
  for (const [label, word] of [['common word', COMMON], ['rare word', RARE], ...MIDDLE] as const) {
    const note = await ctx.quiet();
    const filter = conversationFilter({ q: word }, MEMBER);
    const plan: Statement[] = [];
    const capture = (q: Statement) => plan.push({ sql: q.sql, bindings: q.bindings });
    runtime.db.on('query', capture);
    const found = (await store.listWithMarks(siteId, filter, undefined, 26, MEMBER)).length;
    runtime.db.off('query', capture);
    const bareFound = await bare(plan);
    if (found !== bareFound) throw new Error(`search bench: the service found ${found} rows, the bare statements ${bareFound}`);
    if (found === 0) throw new Error(`search bench: nothing found for "${word}" (is the full-text index empty?)`);
    ctx.log(`search (${engine}): ${label} (${found} rows on the first page, ${plan.length} statements)`);
    const service = await timed(() => store.listWithMarks(siteId, filter, undefined, 26, MEMBER));
    const baseline = await timed(() => bare(plan));
    const [p95, bareP95] = [percentile(service, 95), percentile(baseline, 95)];
    rows.push({
      what: `inbox search, first page, ${label} \`${word}\` (${messages.toLocaleString('en-US')} message entries, ${engine}; baseline: the plan's ${plan.length} statement${plan.length > 1 ? 's' : ''} by plain ${engine === 'MariaDB' ? 'mysql2' : 'better-sqlite3'})`,
      value: p95,
      unit: 'ms p95',
      baseline: bareP95,
      ratio: p95 / bareP95,
      p50Ms: percentile(service, 50),
      p99Ms: percentile(service, 99),
      note: [`${SAMPLES} sequential requests; bare p50 ${percentile(baseline, 50).toFixed(2)} ms`, note].filter(Boolean).join('; '),
    });
  }
  return rows;
}

export async function runSearchPart(ctx: BenchContext): Promise<BenchRow[]> {
  const messages = ctx.options.messages;
  const rows: BenchRow[] = [];
  if (ctx.options.engines.includes('mysql')) {
    const { url, siteId } = await ensureDataset(ctx, ctx.options.mysqlServerUrl, messages);
    const runtime = await openRuntime(loadConfig({ DATA_DIR: '/tmp', DATABASE_URL: url, LOG_LEVEL: 'silent', NODE_ENV: 'production' }));
    const conn = await mysql.createConnection({ uri: url });
    try {
      rows.push(
        ...(await measureWords(ctx, runtime, siteId, 'MariaDB', messages, async (plan) => {
          let found = 0;
          for (const s of plan) found += listed(s, ((await conn.query(s.sql, s.bindings)) as unknown as [unknown[]])[0]);
          return found;
        })),
      );
    } finally {
      await conn.end();
      await runtime.close();
    }
  }
  if (ctx.options.engines.includes('sqlite')) {
    const entries = Math.min(messages, SQLITE_MAX_ENTRIES);
    const { dataDir, siteId } = await ensureSqliteDataset(ctx, entries);
    const runtime = await openRuntime(loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', NODE_ENV: 'production' }));
    const db = new Sqlite(path.join(dataDir, 'chat.sqlite3'), { readonly: true });
    registerSqliteFunctions(db); // the walk's row test, as the service's connections have it
    try {
      rows.push(
        ...(await measureWords(ctx, runtime, siteId, 'SQLite', entries, async (plan) => {
          let found = 0;
          for (const s of plan) found += listed(s, db.prepare(s.sql).all(...s.bindings));
          return found;
        })),
      );
    } finally {
      db.close();
      await runtime.close();
    }
  }
  return rows;
}
