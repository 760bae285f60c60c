/**
 * The inbox search's part of `npm run bench` (issue 25, item 2): the first page (26 rows, as the
 * service asks for a page of 25) of `q=<common word>` and of `q=<rare word>` on a site whose search
 * read model holds `--messages` message entries (1,000,000 by default) over a tenth as many
 * conversations, on MariaDB. The service's figure is the list statement as the conversation store
 * builds it (server/conversations/store.ts with the search store's match and the member's read
 * marks), sent through Knex; the bare baseline is the same SQL written by hand and sent with plain
 * mysql2 on one connection. Sequential requests, p50 and p95 of each.
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
import { newId } from '../../server/platform/ids';
import { createConversationStore } from '../../server/conversations/store';
import { conversationFilter } from '../../server/conversations/filter';
import type { BenchContext } from './context';
import { BenchRow, percentile } from './measure';

const COMMON = 'order';
const RARE = 'zebrafish';
const RARE_COUNT = 20;
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
    const random = seeded(25);
    const siteId = newId('ws', Date.UTC(2026, 0, 1));
    await conn.query('INSERT INTO sites (id, name, created_at) VALUES (?, ?, ?)', [siteId, 'search bench', Date.now()]);
    const conversations = Math.max(1, Math.floor(messages / 10));
    const from = Date.UTC(2025, 10, 1);
    const convRows: unknown[][] = [];
    for (let i = 0; i < conversations; i++) {
      const created = from + Math.floor((i / conversations) * 365 * DAY);
      const open = i % 2 === 0;
      convRows.push([
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
    for (let i = 0; i < convRows.length; i += ROWS_PER_INSERT) {
      await conn.query('INSERT INTO conversations (id, site_id, visitor_id, state, open_marker, created_at, updated_at, last_message_at, closed_at) VALUES ?', [
        convRows.slice(i, i + ROWS_PER_INSERT),
      ]);
    }
    const rareAt = new Set(Array.from({ length: RARE_COUNT }, (_, i) => Math.floor(((i + 0.5) / RARE_COUNT) * messages)));
    let batch: unknown[][] = [];
    for (let m = 0; m < messages; m++) {
      const conv = convRows[m % conversations];
      const text = rareAt.has(m) ? `${messageText(random)} ${RARE}` : messageText(random);
      batch.push([conv[1], conv[0], 'message', newId('msg', (conv[5] as number) + m), text, conv[5]]);
      if (batch.length === ROWS_PER_INSERT || m === messages - 1) {
        await conn.query('INSERT INTO search_entries (site_id, conversation_id, kind, source_id, body, created_at) VALUES ?', [batch]);
        batch = [];
      }
      if (m % 200_000 === 0 && m) ctx.log(`search: ${m.toLocaleString('en-US')} entries`);
    }
    ctx.log('search: building the full-text index');
    // As the migration builds it (server/db/fulltext.ts): with the empty stopword list.
    await conn.query('SET SESSION innodb_ft_user_stopword_table = ?', [`${name}/search_entries_stopwords`]);
    await conn.query('ALTER TABLE search_entries ADD FULLTEXT INDEX search_entries_body (body)');
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

export async function runSearchPart(ctx: BenchContext): Promise<BenchRow[]> {
  const messages = ctx.options.messages;
  const { url, siteId } = await ensureDataset(ctx, ctx.options.mysqlServerUrl, messages);
  const runtime = await openRuntime(loadConfig({ DATA_DIR: '/tmp', DATABASE_URL: url, LOG_LEVEL: 'silent', NODE_ENV: 'production' }));
  const bare = await mysql.createConnection({ uri: url });
  const store = createConversationStore(runtime.db);
  const bareSql = `SELECT c.id, c.site_id, c.visitor_id, c.state, c.open_marker, c.created_at, c.updated_at, c.last_message_at, c.closed_at, c.assignee_id,
      r.last_read_at AS read_at, r.last_read_message_id AS read_message_id
    FROM conversations c LEFT JOIN inbox_reads r ON r.conversation_id = c.id AND r.account_id = ?
    WHERE c.site_id = ? AND c.id IN (SELECT s.conversation_id FROM search_entries s WHERE s.site_id = ? AND MATCH(s.body) AGAINST (? IN BOOLEAN MODE))
    ORDER BY c.created_at DESC, c.id DESC LIMIT 26`;
  const rows: BenchRow[] = [];
  try {
    for (const [label, word] of [
      ['common word', COMMON],
      ['rare word', RARE],
    ] as const) {
      const note = await ctx.quiet();
      const filter = conversationFilter({ q: word }, MEMBER);
      const found = (await store.listWithMarks(siteId, filter, undefined, 26, MEMBER)).length;
      const [bareFound] = (await bare.query(bareSql, [MEMBER, siteId, siteId, `+${word}*`])) as unknown as [unknown[]];
      if (found !== bareFound.length) throw new Error(`search bench: the service found ${found} rows, the bare query ${bareFound.length}`);
      ctx.log(`search: ${label} (${found} rows on the first page)`);
      const service = await timed(() => store.listWithMarks(siteId, filter, undefined, 26, MEMBER));
      const baseline = await timed(() => bare.query(bareSql, [MEMBER, siteId, siteId, `+${word}*`]));
      const [p95, bareP95] = [percentile(service, 95), percentile(baseline, 95)];
      rows.push({
        what: `inbox search, first page, ${label} \`${word}\` (${messages.toLocaleString('en-US')} message entries, MariaDB; baseline: the same SQL by plain mysql2)`,
        value: p95,
        unit: 'ms p95',
        baseline: bareP95,
        ratio: p95 / bareP95,
        p50Ms: percentile(service, 50),
        p99Ms: percentile(service, 99),
        note: [`${SAMPLES} sequential requests; bare p50 ${percentile(baseline, 50).toFixed(2)} ms`, note].filter(Boolean).join('; '),
      });
    }
  } finally {
    await bare.end();
    await runtime.close();
  }
  return rows;
}
