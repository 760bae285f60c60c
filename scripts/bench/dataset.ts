/**
 * The benchmark's data set, built once and cached (issue 8's shape):
 *   - `sites` sites with `keysPerSite` real API keys each (made by server/access, so the service
 *     accepts them; their secrets are kept in DATA_DIR/dataset.json, beside the master key);
 *   - `conversations` conversations spread over every site but the first, and `bigSiteConversations`
 *     more in the first ("big") site, half of them closed, created over a year, updated up to a week later;
 *   - `messages` messages: `longConversationMessages` in one conversation, the rest spread evenly.
 * The schema is the service's own (server/db migrate). Rows go in with multi-row INSERTs: the setup
 * is not what is measured. A marker table `bench_dataset` records the shape, so a later run with the
 * same shape reuses the data set and one with another shape (or --rebuild) builds it again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import mysql from 'mysql2/promise';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import { SCOPES } from '../../server/access/scopes';
import { newId } from '../../server/platform/ids';
import type { Engine } from './options';
import { REPO_ROOT } from './processes';

export interface DatasetShape {
  sites: number;
  keysPerSite: number;
  conversations: number;
  bigSiteConversations: number;
  messages: number;
  longConversationMessages: number;
}

export interface SiteKeys {
  siteId: string;
  keys: string[];
}

export interface Dataset {
  engine: Engine;
  shape: DatasetShape;
  /** Full URL with the database name (MariaDB); undefined for SQLite. */
  databaseUrl?: string;
  /** DATA_DIR for every process that uses this data set (master key, SQLite file, TLS not included). */
  dataDir: string;
  sites: SiteKeys[];
  bigSiteId: string;
  longConversation: { id: string; siteId: string };
  /** Conversations with messages, sampled evenly, for "random conversation" reads and replies (open ones). */
  sampleConversations: { id: string; siteId: string; state: 'open' | 'closed' }[];
  /** The time span the conversations were created in (ms), for the filter windows of the depth part. */
  createdFrom: number;
  createdTo: number;
  buildSeconds: number;
}

export const FULL_SHAPE: DatasetShape = {
  sites: 100,
  keysPerSite: 10,
  conversations: 10_000,
  bigSiteConversations: 100_000,
  messages: 1_000_000,
  longConversationMessages: 30_000,
};

/** The shape for a message count: the shape, with the message count given. */
export function shapeFor(messages: number): DatasetShape {
  return { ...FULL_SHAPE, messages: Math.max(messages, FULL_SHAPE.longConversationMessages + FULL_SHAPE.conversations) };
}

// better-sqlite3 ships no types (and @types/better-sqlite3 is not installed): the little used here.
interface SqliteStatement {
  run(...values: unknown[]): unknown;
  get(...values: unknown[]): unknown;
}
interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  pragma(text: string): unknown;
  exec(sql: string): void;
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}
const Database = require('better-sqlite3') as new (file: string, opts?: { readonly?: boolean }) => SqliteDatabase;

const DAY_MS = 24 * 3600 * 1000;
const SAMPLE_SIZE = 1000;
const MYSQL_ROWS_PER_INSERT = 2000;

/** A short name for a shape, so two shapes never share a cache. */
function shapeTag(shape: DatasetShape): string {
  if (JSON.stringify(shape) === JSON.stringify(FULL_SHAPE)) return 'v1';
  return 'v1_' + createHash('sha256').update(JSON.stringify(shape)).digest('hex').slice(0, 8);
}

export function benchDir(): string {
  return path.join(REPO_ROOT, '.bench');
}

/** A deterministic pseudo-random sequence, so two builds of one shape have the same distribution. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ConversationRow {
  id: string;
  site_id: string;
  visitor_id: string;
  state: 'open' | 'closed';
  open_marker: 1 | null;
  created_at: number;
  updated_at: number;
  last_message_at: number;
  closed_at: number | null;
}

type MessageTuple = [string, string, string, string, string, null, string, string, number];
const MESSAGE_COLUMNS = ['id', 'conversation_id', 'site_id', 'direction', 'origin', 'api_key_id', 'content', 'format', 'created_at'];
const CONVERSATION_COLUMNS = ['id', 'site_id', 'visitor_id', 'state', 'open_marker', 'created_at', 'updated_at', 'last_message_at', 'closed_at'];

const WORDS =
  'hello order shipping parcel refund invoice thanks please when where account password delivery size colour return exchange today tomorrow address payment card'.split(
    ' ',
  );

/**
 * Generates the rows in batches and hands them to `sink`; returns what the benchmark needs to know
 * about them. Conversations and messages of one batch are written before the next batch is made, so
 * memory stays flat whatever the size.
 */
async function generateRows(
  shape: DatasetShape,
  siteIds: string[],
  sink: { conversations(rows: ConversationRow[]): Promise<void>; messages(rows: MessageTuple[]): Promise<void> },
  log: (m: string) => void,
) {
  const random = seededRandom(42);
  const createdTo = Date.now() - 8 * DAY_MS;
  const createdFrom = createdTo - 365 * DAY_MS;
  const text = (n: number) => {
    const words: string[] = [];
    const count = 5 + Math.floor(random() * 20);
    for (let i = 0; i < count; i++) words.push(WORDS[Math.floor(random() * WORDS.length)]);
    return `${words.join(' ')} #${n}`;
  };
  const conversation = (siteId: string, n: number, createdAt: number, updatedAt: number): ConversationRow => {
    const closed = random() < 0.5;
    return {
      id: newId('conv', createdAt),
      site_id: siteId,
      visitor_id: `bench-visitor-${n}`,
      state: closed ? 'closed' : 'open',
      open_marker: closed ? null : 1,
      created_at: createdAt,
      updated_at: updatedAt,
      last_message_at: updatedAt,
      closed_at: closed ? updatedAt : null,
    };
  };
  const messagesOf = (conv: ConversationRow, count: number, spanMs: number): MessageTuple[] => {
    const rows: MessageTuple[] = [];
    for (let i = 0; i < count; i++) {
      const at = conv.created_at + Math.floor((spanMs * i) / Math.max(1, count));
      const incoming = i % 2 === 0;
      rows.push([newId('msg', at), conv.id, conv.site_id, incoming ? 'incoming' : 'outgoing', incoming ? 'widget' : 'messenger', null, text(i), 'plain', at]);
    }
    return rows;
  };

  // The big site: many conversations, few messages (none), for list depth.
  const bigSiteId = siteIds[0];
  for (let done = 0; done < shape.bigSiteConversations;) {
    const batch: ConversationRow[] = [];
    for (; batch.length < MYSQL_ROWS_PER_INSERT && done < shape.bigSiteConversations; done++) {
      const createdAt = createdFrom + Math.floor(((createdTo - createdFrom) * done) / shape.bigSiteConversations) + Math.floor(random() * 1000);
      batch.push(conversation(bigSiteId, done, createdAt, createdAt + Math.floor(random() * 7 * DAY_MS)));
    }
    await sink.conversations(batch);
  }
  log(`  ${shape.bigSiteConversations} conversations of the big site written`);

  // The long conversation: in the second site, open, its messages a minute apart.
  const long = conversation(siteIds[1], -1, createdFrom, createdFrom + shape.longConversationMessages * 60_000);
  Object.assign(long, { state: 'open', open_marker: 1, closed_at: null });
  await sink.conversations([long]);
  const longMessages = messagesOf(long, shape.longConversationMessages, shape.longConversationMessages * 60_000);
  for (let done = 0; done < longMessages.length; done += MYSQL_ROWS_PER_INSERT) await sink.messages(longMessages.slice(done, done + MYSQL_ROWS_PER_INSERT));

  // The other conversations over the other sites, each with its share of the messages.
  const perConversation = Math.floor((shape.messages - shape.longConversationMessages) / shape.conversations);
  const sample: Dataset['sampleConversations'] = [];
  const sampleEvery = Math.max(1, Math.floor(shape.conversations / SAMPLE_SIZE));
  let conversations: ConversationRow[] = [];
  let messages: MessageTuple[] = [];
  for (let n = 0; n < shape.conversations; n++) {
    const siteId = siteIds[1 + (n % (siteIds.length - 1))];
    const createdAt = createdFrom + Math.floor(random() * (createdTo - createdFrom));
    const span = Math.floor(random() * 7 * DAY_MS);
    const conv = conversation(siteId, shape.bigSiteConversations + n, createdAt, createdAt + span);
    conversations.push(conv);
    messages.push(...messagesOf(conv, perConversation, span));
    if (n % sampleEvery === 0) sample.push({ id: conv.id, siteId, state: conv.state });
    if (messages.length >= MYSQL_ROWS_PER_INSERT * 5 || n === shape.conversations - 1) {
      await sink.conversations(conversations);
      for (let i = 0; i < messages.length; i += MYSQL_ROWS_PER_INSERT) await sink.messages(messages.slice(i, i + MYSQL_ROWS_PER_INSERT));
      conversations = [];
      messages = [];
    }
    if ((n + 1) % 2000 === 0) log(`  ${n + 1} of ${shape.conversations} conversations with their messages written`);
  }
  return { bigSiteId, longConversation: { id: long.id, siteId: long.site_id }, sample, createdFrom, createdTo };
}

/** Sites and keys through the service's own access service, so keys are stored as the service expects. */
async function createSitesAndKeys(
  databaseUrl: string | undefined,
  dataDir: string,
  shape: DatasetShape,
): Promise<{ sites: SiteKeys[]; close(): Promise<void> }> {
  const config = loadConfig({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', NODE_ENV: 'production' });
  const runtime = await openRuntime(config);
  const sites: SiteKeys[] = [];
  for (let s = 0; s < shape.sites; s++) {
    const site = await runtime.services.access.createSite(s === 0 ? 'bench big site' : `bench site ${s}`);
    const keys: string[] = [];
    for (let k = 0; k < shape.keysPerSite; k++) keys.push((await runtime.services.access.createKey(site.id, [...SCOPES], `bench ${k}`)).key);
    sites.push({ siteId: site.id, keys });
  }
  return { sites, close: () => runtime.close() };
}

function readCached(dataDir: string, shape: DatasetShape): Dataset | undefined {
  const file = path.join(dataDir, 'dataset.json');
  if (!fs.existsSync(file) || !fs.existsSync(path.join(dataDir, 'master.key'))) return undefined;
  const dataset = JSON.parse(fs.readFileSync(file, 'utf8')) as Dataset;
  return JSON.stringify(dataset.shape) === JSON.stringify(shape) ? dataset : undefined;
}

function writeCached(dataset: Dataset): void {
  fs.writeFileSync(path.join(dataset.dataDir, 'dataset.json'), JSON.stringify(dataset, null, 1), { mode: 0o600 });
}

/** The MariaDB data set: reused when its marker and its DATA_DIR agree with the shape, else built. */
export async function mysqlDataset(
  serverUrl: string,
  shape: DatasetShape,
  opts: { rebuild: boolean; log(m: string): void; /** A database and DATA_DIR of its own (the bench's tests). */ name?: string; dataDir?: string },
): Promise<Dataset> {
  const name = opts.name ?? `chat_bench_${shapeTag(shape)}`;
  const dataDir = opts.dataDir ?? path.join(benchDir(), name);
  const databaseUrl = `${serverUrl}/${name}`;
  const admin = await mysql.createConnection({ uri: serverUrl, multipleStatements: false });
  try {
    if (!opts.rebuild) {
      const cached = readCached(dataDir, shape);
      // No such database or table yet: nothing to reuse.
      const [marker] = (await admin.query(`SELECT shape FROM \`${name}\`.bench_dataset`).catch(() => [[]])) as unknown as [{ shape: string }[]];
      if (cached && marker.length === 1 && marker[0].shape === JSON.stringify(shape)) {
        opts.log(`reusing the MariaDB data set ${name} (built in ${cached.buildSeconds} s)`);
        return cached;
      }
    }
    opts.log(`building the MariaDB data set ${name}: ${JSON.stringify(shape)}`);
    const started = Date.now();
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });

    const access = await createSitesAndKeys(databaseUrl, dataDir, shape);
    await access.close();
    const conn = await mysql.createConnection({ uri: databaseUrl, supportBigNumbers: true });
    // Checks the generator guarantees already; MariaDB then writes the rows without per-row lookups.
    await conn.query('SET SESSION foreign_key_checks = 0, unique_checks = 0');
    const insert = async (table: string, columns: string[], rows: unknown[][]) => {
      if (rows.length) await conn.query(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ?`, [rows]);
    };
    const generated = await generateRows(
      shape,
      access.sites.map((s) => s.siteId),
      {
        conversations: (rows) =>
          insert(
            'conversations',
            CONVERSATION_COLUMNS,
            rows.map((r) => CONVERSATION_COLUMNS.map((c) => r[c as keyof ConversationRow])),
          ),
        messages: (rows) => insert('messages', MESSAGE_COLUMNS, rows),
      },
      opts.log,
    );
    await conn.query('ANALYZE TABLE conversations, messages, api_keys, sites');
    const dataset: Dataset = {
      engine: 'mysql',
      shape,
      databaseUrl,
      dataDir,
      sites: access.sites,
      ...datasetFields(generated),
      buildSeconds: Math.round((Date.now() - started) / 1000),
    };
    writeCached(dataset);
    await conn.query('CREATE TABLE bench_dataset (shape TEXT NOT NULL, built_at BIGINT NOT NULL)');
    await conn.query('INSERT INTO bench_dataset VALUES (?, ?)', [JSON.stringify(shape), Date.now()]);
    await conn.end();
    opts.log(`built ${name} in ${dataset.buildSeconds} s`);
    return dataset;
  } finally {
    await admin.end();
  }
}

function datasetFields(generated: Awaited<ReturnType<typeof generateRows>>) {
  return {
    bigSiteId: generated.bigSiteId,
    longConversation: generated.longConversation,
    sampleConversations: generated.sample,
    createdFrom: generated.createdFrom,
    createdTo: generated.createdTo,
  };
}

/** The SQLite data set in .bench/chat_bench_<tag>_sqlite/chat.sqlite3 (the file the service opens in DATA_DIR). */
export async function sqliteDataset(shape: DatasetShape, opts: { rebuild: boolean; log(m: string): void; dataDir?: string }): Promise<Dataset> {
  const name = `chat_bench_${shapeTag(shape)}_sqlite`;
  const dataDir = opts.dataDir ?? path.join(benchDir(), name);
  const file = path.join(dataDir, 'chat.sqlite3');
  if (!opts.rebuild) {
    const cached = readCached(dataDir, shape);
    if (cached && fs.existsSync(file)) {
      const db = new Database(file, { readonly: true });
      const marker = db.prepare("SELECT name FROM sqlite_master WHERE name = 'bench_dataset'").get()
        ? (db.prepare('SELECT shape FROM bench_dataset').get() as { shape: string } | undefined)
        : undefined;
      db.close();
      if (marker?.shape === JSON.stringify(shape)) {
        opts.log(`reusing the SQLite data set ${name} (built in ${cached.buildSeconds} s)`);
        return cached;
      }
    }
  }
  opts.log(`building the SQLite data set ${name}: ${JSON.stringify(shape)}`);
  const started = Date.now();
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const access = await createSitesAndKeys(undefined, dataDir, shape);
  await access.close();
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const insertConversation = db.prepare(
    `INSERT INTO conversations (${CONVERSATION_COLUMNS.join(', ')}) VALUES (${CONVERSATION_COLUMNS.map(() => '?').join(', ')})`,
  );
  const insertMessage = db.prepare(`INSERT INTO messages (${MESSAGE_COLUMNS.join(', ')}) VALUES (${MESSAGE_COLUMNS.map(() => '?').join(', ')})`);
  const conversations = db.transaction((rows: ConversationRow[]) => {
    for (const r of rows) insertConversation.run(...CONVERSATION_COLUMNS.map((c) => r[c as keyof ConversationRow]));
  });
  const messages = db.transaction((rows: MessageTuple[]) => {
    for (const r of rows) insertMessage.run(...r);
  });
  const generated = await generateRows(
    shape,
    access.sites.map((s) => s.siteId),
    { conversations: async (rows) => conversations(rows), messages: async (rows) => messages(rows) },
    opts.log,
  );
  db.exec('ANALYZE');
  const dataset: Dataset = {
    engine: 'sqlite',
    shape,
    dataDir,
    sites: access.sites,
    ...datasetFields(generated),
    buildSeconds: Math.round((Date.now() - started) / 1000),
  };
  writeCached(dataset);
  db.exec('CREATE TABLE bench_dataset (shape TEXT NOT NULL, built_at INTEGER NOT NULL)');
  db.prepare('INSERT INTO bench_dataset VALUES (?, ?)').run(JSON.stringify(shape), Date.now());
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  opts.log(`built ${name} in ${dataset.buildSeconds} s`);
  return dataset;
}

/** The key of a site (the first of its keys). */
export function keyOf(dataset: Dataset, siteId: string): string {
  const site = dataset.sites.find((s) => s.siteId === siteId);
  if (!site) throw new Error(`no site ${siteId} in the data set`);
  return site.keys[0];
}
