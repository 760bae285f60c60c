/**
 * List depth: page 1 against page ~1,000 (25 a page) of the big site's conversation list, for every
 * combination of the document's filters (state, createdAfter, createdBefore, updatedAfter,
 * updatedBefore; openapi/openapi.yaml listConversations), and of the 30,000-message conversation's
 * messages. The deep cursor is reached by walking the list as a client would (100 a page, then the
 * remainder). Each figure is the median latency of single requests, page 1 and the deep page
 * alternated. On MariaDB the SQL the service sends for each deep page is captured from the general
 * log and run through ANALYZE, and the plans (index used, rows read) are printed after the results table.
 */
import mysql from 'mysql2/promise';
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import { median } from './measure';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import { fetchJson, timeOne } from './load';
import { API_BASE, startService } from './processes';
import { tlsEnv } from './read';

const PAGE = 25;
const WALK_PAGE = 100;
const TIMED_PAIRS = 11;

interface ListPage {
  data: unknown[];
  page: { nextCursor: string | null; hasMore: boolean };
}

type Filters = Record<string, string>;

/** Every subset of the five filters: state=open and time windows that each leave out about 5 %. */
export function filterCombinations(dataset: Dataset): Filters[] {
  const span = dataset.createdTo - dataset.createdFrom;
  const at = (ms: number) => new Date(ms).toISOString();
  const all: Filters = {
    state: 'open',
    createdAfter: at(dataset.createdFrom + span * 0.05),
    createdBefore: at(dataset.createdTo - span * 0.05),
    updatedAfter: at(dataset.createdFrom + span * 0.05),
    updatedBefore: at(dataset.createdTo - span * 0.05),
  };
  const names = Object.keys(all);
  const combos: Filters[] = [];
  for (let mask = 0; mask < 1 << names.length; mask++) {
    combos.push(Object.fromEntries(names.filter((_, i) => mask & (1 << i)).map((n) => [n, all[n]])));
  }
  return combos;
}

function describe(filters: Filters): string {
  const names = Object.keys(filters);
  return names.length ? names.map((n) => (n === 'state' ? `state=${filters[n]}` : n)).join('+') : 'no filter';
}

function query(filters: Filters, limit: number, cursor?: string): string {
  const params = new URLSearchParams({ ...filters, limit: String(limit) });
  if (cursor) params.set('cursor', cursor);
  return params.toString();
}

/** Walks `rows` rows into a list; the cursor of the page after them, and how many rows were passed. */
async function walk(base: string, path: string, filters: Filters, headers: Record<string, string>, rows: number): Promise<{ cursor?: string; passed: number }> {
  let cursor: string | undefined;
  let passed = 0;
  while (passed < rows) {
    const limit = Math.min(WALK_PAGE, rows - passed);
    const page = await fetchJson<ListPage>(base, { path: `${path}?${query(filters, limit, cursor)}`, headers });
    passed += page.data.length;
    if (!page.page.nextCursor) return { cursor, passed: passed - page.data.length };
    cursor = page.page.nextCursor;
  }
  return { cursor, passed };
}

/** Median latencies of page 1 and the deep page, requested alternately. */
async function timePages(base: string, first: string, deep: string, headers: Record<string, string>) {
  const firstMs: number[] = [];
  const deepMs: number[] = [];
  for (let i = 0; i < TIMED_PAIRS; i++) {
    for (const [path, into] of [
      [first, firstMs],
      [deep, deepMs],
    ] as const) {
      const res = await timeOne(base, { path, headers });
      if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${res.body.slice(0, 300)}`);
      into.push(res.ms);
    }
  }
  return { first: median(firstMs), deep: median(deepMs) };
}

/** The statements the service sent while `during` ran that mention `marker`, from MariaDB's general log. */
async function captureStatements(admin: mysql.Connection, marker: string, during: () => Promise<unknown>): Promise<string[]> {
  const [[saved]] = (await admin.query('SELECT @@global.general_log AS enabled, @@global.log_output AS output')) as unknown as [
    { enabled: number; output: string }[],
  ];
  const [[{ since }]] = (await admin.query('SELECT NOW(6) AS since')) as unknown as [{ since: Date }[]];
  await admin.query("SET GLOBAL log_output = 'TABLE', general_log = 1");
  try {
    await during();
  } finally {
    await admin.query(`SET GLOBAL general_log = ?, log_output = ?`, [saved.enabled, saved.output]);
  }
  const [rows] = (await admin.query(
    "SELECT CONVERT(argument USING utf8mb4) AS statement FROM mysql.general_log WHERE event_time >= ? AND command_type IN ('Query', 'Execute') AND argument LIKE ? ORDER BY event_time",
    [since, `%${marker}%`],
  )) as unknown as [{ statement: string }[]];
  return rows.map((r) => r.statement).filter((s) => /^\s*select/i.test(s));
}

/** ANALYZE of one statement, as compact lines: table, access type, index, rows estimated and read. */
async function analyze(db: mysql.Connection, statement: string): Promise<string> {
  const [rows] = (await db.query(`ANALYZE ${statement}`)) as unknown as [Record<string, unknown>[]];
  return rows
    .map((r) => `    ${r.table}: type=${r.type} key=${r.key ?? 'none'} rows=${r.rows} r_rows=${r.r_rows} r_filtered=${r.r_filtered} ${r.Extra ?? ''}`.trimEnd())
    .join('\n');
}

export async function runDepthPart(ctx: BenchContext, dataset: Dataset): Promise<{ rows: BenchRow[]; plans: string }> {
  const engine = dataset.engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: tlsEnv(ctx) });
  const admin = dataset.engine === 'mysql' ? await mysql.createConnection({ uri: dataset.databaseUrl! }) : undefined;
  const rows: BenchRow[] = [];
  const plans: string[] = [];
  const deepRows = (ctx.options.depthPages - 1) * PAGE;
  try {
    const lists = [
      ...filterCombinations(dataset).map((filters) => ({
        what: `conversation list, ${describe(filters)}`,
        path: `${API_BASE}/conversations`,
        filters,
        headers: { authorization: `Bearer ${keyOf(dataset, dataset.bigSiteId)}` },
        marker: dataset.bigSiteId,
      })),
      {
        what: 'messages of the 30,000-message conversation',
        path: `${API_BASE}/conversations/${dataset.longConversation.id}/messages`,
        filters: {} as Filters,
        headers: { authorization: `Bearer ${keyOf(dataset, dataset.longConversation.siteId)}` },
        marker: dataset.longConversation.id,
      },
    ];
    for (const list of lists) {
      const { cursor, passed } = await walk(service.url, list.path, list.filters, list.headers, deepRows);
      const deepPage = Math.floor(passed / PAGE) + 1;
      const first = `${list.path}?${query(list.filters, PAGE)}`;
      const deep = `${list.path}?${query(list.filters, PAGE, cursor)}`;
      const busy = await ctx.quiet();
      const timing = await timePages(service.url, first, deep, list.headers);
      ctx.log(`  depth ${engine} ${list.what}: page 1 ${timing.first.toFixed(1)} ms, page ${deepPage} ${timing.deep.toFixed(1)} ms`);
      rows.push({
        what: `${list.what}, page ${deepPage} vs page 1, ${engine} (target ratio ≤ 1.5)`,
        value: timing.deep,
        unit: 'ms',
        baseline: timing.first,
        ratio: timing.deep / timing.first,
        p50Ms: timing.deep,
        note: [deepPage < ctx.options.depthPages ? `the list ends at page ${deepPage}` : '', busy].filter(Boolean).join('; '),
      });
      if (admin) {
        const statements = await captureStatements(admin, list.marker, () => timeOne(service.url, { path: deep, headers: list.headers }));
        // The list query is the one that sorts; the key and conversation lookups have their own plans.
        const listStatement = statements.find((s) => /order by/i.test(s));
        plans.push(
          `${list.what}, page ${deepPage}:\n    ${listStatement ?? '(statement not captured)'}\n${listStatement ? await analyze(admin, listStatement) : ''}`,
        );
      }
    }
  } finally {
    await admin?.end();
    await service.stop();
  }
  return { rows, plans: plans.join('\n\n') };
}
