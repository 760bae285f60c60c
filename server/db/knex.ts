import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { Knex } from 'knex';
import { dialectOf } from './dialect';
import { migrationSource } from './migrations';
import { StartupError } from '../platform/startup';
import { registerSqliteFunctions } from './fulltext';

export { dialectOf, onMysqlTable, type Dialect } from './dialect';
export type Db = Knex;

/**
 * One Knex instance. SQLite by default (file in DATA_DIR), MySQL/MariaDB when DATABASE_URL is
 * `mysql://...`. SQLite runs in WAL mode with a busy timeout, one connection, so concurrent
 * requests queue inside Knex instead of failing with SQLITE_BUSY.
 */
export function createDb(opts: { databaseUrl?: string; dataDir: string }): Knex {
  if (opts.databaseUrl) {
    const url = parseDatabaseUrl(opts.databaseUrl);
    const connection = {
      host: url.hostname,
      port: Number(url.port || 3306),
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      database: url.pathname.replace(/^\//, ''),
      charset: 'utf8mb4',
      // Times are integer milliseconds in BIGINT columns; keep them numbers.
      supportBigNumbers: true,
      bigNumberStrings: false,
      connectTimeout: MYSQL_TIMEOUTS.connectMs,
      // TCP keep-alive finds pooled connections a firewall or a rebooted host dropped silently.
      enableKeepAlive: true,
      keepAliveInitialDelay: 30_000,
    };
    const guard = createMysqlGuard(connection);
    const mysql = knexFactory({
      client: 'mysql2',
      connection,
      pool: {
        min: 0,
        max: 10,
        // Idle connections are closed well before MariaDB's wait_timeout or a NAT forgets them.
        idleTimeoutMillis: 30_000,
        afterCreate(conn: MysqlConnection, done: (err: Error | null, conn: unknown) => void) {
          guard.watch(conn);
          // MariaDB waits 50 s for a row lock by default; runInTransaction retries a lock-wait
          // time-out, so a request could hang for minutes. 10 s, then retry, then 503.
          conn.query(`SET SESSION innodb_lock_wait_timeout = ${MYSQL_TIMEOUTS.lockWaitSeconds}`, [], (err: Error | null) => done(err, conn)); // through the stall guard
        },
      },
      acquireConnectionTimeout: MYSQL_TIMEOUTS.acquireMs,
    });
    guard.attach(mysql);
    return mysql;
  }
  fs.mkdirSync(opts.dataDir, { recursive: true });
  const sqlite = knexFactory({
    client: 'better-sqlite3',
    connection: { filename: path.join(opts.dataDir, 'chat.sqlite3') },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: { pragma(s: string): unknown } & Parameters<typeof registerSqliteFunctions>[0], done: (err: Error | null, conn: unknown) => void) {
        // The busy wait first: switching a new file to WAL needs a lock that a second process
        // starting at the same moment may hold.
        conn.pragma('busy_timeout = 5000');
        conn.pragma('journal_mode = WAL');
        conn.pragma('foreign_keys = ON');
        conn.pragma('synchronous = NORMAL');
        registerSqliteFunctions(conn);
        done(null, conn);
      },
    },
  });
  beginSqliteTransactionsImmediately(sqlite);
  return sqlite;
}

const DATABASE_URL_FORM = 'mysql://user:password@host:3306/database';

/** The URL with its password masked, for messages: a malformed value may still carry one. */
export function redactedDatabaseUrl(value: string): string {
  const at = value.lastIndexOf('@');
  const afterScheme = /^[a-z][a-z0-9+.-]*:?\/*/i.exec(value)?.[0].length ?? 0;
  const colon = value.indexOf(':', afterScheme);
  // Everything from the user's colon to the host's @: a password may hold colons, slashes, even @.
  return at < 0 || colon < 0 || colon > at ? value : `${value.slice(0, colon + 1)}***${value.slice(at)}`;
}

/** DATABASE_URL as a URL, or a start-up error naming the variable and its expected form. */
export function parseDatabaseUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new StartupError(`DATABASE_URL is not a URL ("${redactedDatabaseUrl(value)}"): write it as ${DATABASE_URL_FORM}, or unset it for SQLite in DATA_DIR`);
  }
  if (url.protocol !== 'mysql:' && url.protocol !== 'mariadb:') {
    throw new StartupError(
      `DATABASE_URL has the scheme ${url.protocol} where mysql: is expected: write it as ${DATABASE_URL_FORM}, or unset it for SQLite in DATA_DIR`,
    );
  }
  if (!url.hostname || url.pathname.replace(/^\//, '') === '') {
    throw new StartupError(`DATABASE_URL names no host or no database ("${redactedDatabaseUrl(value)}"): write it as ${DATABASE_URL_FORM}`);
  }
  return url;
}

/** Mistakes the database answers with at once: waiting would not change them. */
const REFUSALS: Record<string, (where: string) => string> = {
  ER_ACCESS_DENIED_ERROR: (where) => `DATABASE_URL: ${where} refused the user name or password: correct them in DATABASE_URL, or grant the user access`,
  ER_DBACCESS_DENIED_ERROR: (where) =>
    `DATABASE_URL: ${where} refused the user access to the database: grant it (GRANT ALL ON db.* TO user) or name another database`,
  ER_BAD_DB_ERROR: (where) =>
    `DATABASE_URL: the database it names does not exist on ${where}: create it (CREATE DATABASE ... CHARACTER SET utf8mb4) or correct the name`,
};

export interface WaitForDatabase {
  /** How long to keep trying (DATABASE_CONNECT_TIMEOUT_SECONDS). */
  timeoutSeconds: number;
  /** Told of each failed try and the pause before the next. */
  onRetry(info: { attempt: number; reason: string; retryInMs: number; where: string }): void;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

/**
 * At start a database that is not up yet (a host booting, a container starting beside this one) is
 * waited for, with growing pauses, up to a bound; then one line says which database, why, and what
 * to do. A refusal (wrong password, no such database) ends the wait at once. SQLite answers at once.
 */
export async function waitForDatabase(db: Knex, opts: WaitForDatabase): Promise<void> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const now = opts.now ?? Date.now;
  const conn = db.client.config.connection as { host?: string; port?: number; filename?: string };
  const where = conn.filename ? `SQLite at ${conn.filename}` : `the database at ${conn.host}:${conn.port}`;
  const deadline = now() + opts.timeoutSeconds * 1000;
  let reason = 'no answer';
  for (let attempt = 1; ; attempt++) {
    try {
      await db.raw('select 1');
      return;
    } catch (err) {
      const e = err as { code?: string; message?: string };
      // A SQLite file that cannot be opened now will not open later: no wait. A busy one (another
      // process switching a new file to WAL or migrating it) will, within the same bound.
      if (conn.filename && !e.code?.startsWith('SQLITE_BUSY'))
        throw new StartupError(`DATA_DIR: ${where} cannot be opened (${e.code ?? e.message}): check the file and DATA_DIR, or point DATA_DIR elsewhere`);
      const refusal = e.code ? REFUSALS[e.code] : undefined;
      if (refusal) throw new StartupError(refusal(where));
      if (!isConnectionError(err)) throw err;
      // While the pool's guard holds the server for down it answers its own verdict; the cause seen first says more.
      if (e.code !== 'DATABASE_UNRESPONSIVE' || attempt === 1) reason = e.code ?? e.message ?? reason;
      const retryInMs = connectBackoffMs(attempt);
      if (now() + retryInMs > deadline) {
        if (conn.filename)
          throw new StartupError(
            `DATA_DIR: ${where} stayed locked by another process for ${opts.timeoutSeconds} s (${reason}): stop the process that holds it`,
          );
        throw new StartupError(
          `DATABASE_URL: ${where} did not answer for ${opts.timeoutSeconds} s (${reason}): start MySQL/MariaDB or correct the host and port in DATABASE_URL; DATABASE_CONNECT_TIMEOUT_SECONDS sets how long to wait`,
        );
      }
      opts.onRetry({ attempt, reason, retryInMs, where });
      await sleep(retryInMs);
    }
  }
}

/** 0.5 s, 1 s, 2 s, then every 4 s: quick when the database is just starting, gentle on a long outage. */
export function connectBackoffMs(attempt: number): number {
  return Math.min(4000, 500 * 2 ** (attempt - 1));
}

interface KnexTransactionInternals {
  readOnly?: boolean;
  query(conn: unknown, sql: string): Promise<unknown>;
}
// knex 3 opens every SQLite transaction with a deferred `BEGIN` and has no option for another mode.
// Library patch 1 (docs/library-patches.md; canaries in test/contract/library-patches.test.ts).
const SqliteTransaction = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction') as new (...args: unknown[]) => KnexTransactionInternals;

/**
 * A deferred transaction that reads and then writes fails at once with SQLITE_BUSY_SNAPSHOT when
 * another process (the CLI, `npm run worker`) committed in between; the busy time-out does not help
 * there. BEGIN IMMEDIATE takes the write lock first, waiting up to the busy time-out for it, so the
 * snapshot is always the newest. In this process the one connection serialises transactions anyway;
 * `db.transaction(fn, { readOnly: true })` keeps the deferred BEGIN for transactions that only read.
 */
class ImmediateSqliteTransaction extends SqliteTransaction {
  begin(conn: unknown) {
    return this.query(conn, this.readOnly ? 'BEGIN;' : 'BEGIN IMMEDIATE;');
  }
}

function beginSqliteTransactionsImmediately(db: Knex): void {
  const client = db.client as { transaction: (...args: unknown[]) => unknown };
  // Nested transactions get a client of their own (savepoints); only the outermost BEGIN changes.
  client.transaction = (...args: unknown[]) => new ImmediateSqliteTransaction(db.client, ...args);
}

/**
 * Brings the database to this code's schema; answers the migrations it has that this code does not
 * know. Those are a newer release's, applied while this release still runs (a rolling upgrade, or a
 * restart of an instance not yet upgraded): every migration is safe with the release before it
 * (migrations/README.md), so this code starts. Knex's own check would refuse them as a corrupt list.
 */
export async function migrate(db: Knex): Promise<{ newer: string[] }> {
  return underMigrationLock(db, async () => {
    await db.migrate.latest({ migrationSource, ...NEWER_MIGRATIONS_ALLOWED });
    return { newer: await migrationsNewerThanCode(db) };
  });
}

/** Knex options that let this code run on a database a newer release has migrated further. */
export const NEWER_MIGRATIONS_ALLOWED = { disableMigrationsListValidation: true } as const;

/** The applied migrations this code does not know (a newer release's), oldest first. */
export async function migrationsNewerThanCode(db: Knex): Promise<string[]> {
  const known = new Set(await migrationSource.getMigrations([]));
  const [completed] = (await db.migrate.list({ migrationSource, ...NEWER_MIGRATIONS_ALLOWED })) as [{ name: string }[], unknown[]];
  return completed.map((m) => m.name).filter((name) => !known.has(name));
}

const MIGRATION_LOCK_WAIT_SECONDS = 120;

/**
 * The server, a worker and CLI calls may start at the same moment. Knex's own migration lock does
 * not cover that: on a new database they race to create its tables (the losers fail), and two may
 * each insert its lock row, after which every migration fails as "already locked". So migrations
 * run one process at a time under a lock the engine drops if its holder dies: a named lock on
 * MySQL, an exclusive transaction on a file beside the SQLite database.
 */
async function underMigrationLock<T>(db: Knex, fn: () => Promise<T>): Promise<T> {
  const timeout = () => new Error(`Another process has been migrating the database for ${MIGRATION_LOCK_WAIT_SECONDS} s; try again when it finished.`);
  if (dialectOf(db) === 'mysql') {
    // A transaction only to hold one connection: GET_LOCK belongs to the connection that took it.
    return db.transaction(async (trx) => {
      const name = "CONCAT('chat-service-migrate:', LEFT(SHA1(DATABASE()), 40))"; // one lock per database
      const [rows] = await trx.raw(`SELECT GET_LOCK(${name}, ?) AS got`, [MIGRATION_LOCK_WAIT_SECONDS]);
      if (Number(rows[0].got) !== 1) throw timeout();
      try {
        return await fn();
      } finally {
        await trx.raw(`SELECT RELEASE_LOCK(${name})`);
      }
    });
  }
  const Sqlite = require('better-sqlite3') as new (file: string) => { pragma(s: string): unknown; exec(s: string): unknown; close(): void };
  const lock = new Sqlite(`${(db.client.config.connection as { filename: string }).filename}.migrate-lock`);
  try {
    // Asked without SQLite's busy wait, which would block this process's event loop; polled instead.
    lock.pragma('busy_timeout = 0');
    const deadline = Date.now() + MIGRATION_LOCK_WAIT_SECONDS * 1000;
    for (;;) {
      try {
        lock.exec('BEGIN EXCLUSIVE');
        break;
      } catch (err) {
        if (!String((err as { code?: string }).code ?? '').startsWith('SQLITE_BUSY')) throw err;
        if (Date.now() >= deadline) throw timeout();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return await fn();
  } finally {
    lock.close(); // ends the transaction: the next process goes on
  }
}

/** Is this error a violation of a unique index? (Used for lock-free "insert or find" races.) */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ER_DUP_ENTRY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** The code of our own verdict that the MySQL server stopped answering (createMysqlGuard). */
const DATABASE_UNRESPONSIVE = 'DATABASE_UNRESPONSIVE';

const CONNECTION_ERROR_CODES = new Set([
  // The network: refused while the server is down or restarting, reset or cut while it dies.
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // mysql2: the server closed the connection, a command on a connection already closed, a query time-out.
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'PROTOCOL_ENQUEUE_AFTER_QUIT',
  // The server answers but will not serve: shutting down, killed our connection, full, or misconfigured.
  'ER_SERVER_SHUTDOWN',
  'ER_NORMAL_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_CON_COUNT_ERROR',
  'ER_TOO_MANY_USER_CONNECTIONS',
  'ER_ACCESS_DENIED_ERROR',
  'ER_BAD_DB_ERROR',
  'ER_CANT_CREATE_THREAD',
  'ER_OUT_OF_RESOURCES',
  // Our own verdict (createMysqlGuard): the server stopped answering.
  DATABASE_UNRESPONSIVE,
  'SQLITE_CANTOPEN',
  'SQLITE_BUSY',
]);
const CONNECTION_ERROR_MESSAGES =
  /Unable to acquire a connection|The pool is probably full|aborted|database connection is not open|Connection lost|Can't add new command when connection is in closed state|read ECONNRESET|write EPIPE|Pool is closed/i;

/** Is this error the database being unreachable (as opposed to a bad query)? */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string; fatal?: boolean };
  if (!e) return false;
  if (e.name === 'KnexTimeoutError') return true; // no free pool connection in time
  if (e.code && CONNECTION_ERROR_CODES.has(e.code)) return true;
  if (e.code?.startsWith('SQLITE_BUSY')) return true; // SQLITE_BUSY_SNAPSHOT, _RECOVERY, _TIMEOUT
  return CONNECTION_ERROR_MESSAGES.test(e.message ?? '');
}

/**
 * Time-outs of the MySQL/MariaDB connections (docs/operations.md, Failure behaviour). A server that is down
 * refuses connections and costs nothing to detect; a server that hangs (stopped, overloaded
 * storage, a network black hole) accepts TCP and then never answers, which without these would
 * hold every request forever.
 */
export const MYSQL_TIMEOUTS = {
  /** A new connection (TCP and the MySQL handshake) must be up within this. */
  connectMs: 3000,
  /** Waiting for a free pool connection (10 per process) when all are busy. */
  acquireMs: 5000,
  /** A statement running this long makes us ask whether the server still answers at all. */
  stallCheckMs: 2000,
  /** The liveness probe: a fresh connection, then SELECT 1, each within this. */
  probeMs: 1500,
  /** While the server is taken to be unresponsive, requests fail at once and it is probed this often. */
  recoveryProbeEveryMs: 1000,
  /** innodb_lock_wait_timeout of the service's sessions (MariaDB's default is 50 s). */
  lockWaitSeconds: 10,
};

interface MysqlConnection {
  query(...args: unknown[]): unknown;
  destroy(): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
  stream: { destroy(): void };
  __knex__disposed?: unknown;
}
type QueryCallback = (err: Error | null, ...rest: unknown[]) => void;

function unresponsive(): Error {
  return Object.assign(new Error('Database unavailable: the server does not answer.'), { code: DATABASE_UNRESPONSIVE });
}

/**
 * Tells a slow statement from a dead server without capping statement time: a statement that has
 * run `stallCheckMs` triggers a probe on a fresh connection (shared by every waiting statement). If
 * the server answers, the statement keeps running (a long migration, a lock wait). If it does not,
 * every statement in flight fails with a connection error (their connections are dropped, so a
 * transaction's ROLLBACK fails at once too), and new requests fail at once until a probe, every
 * `recoveryProbeEveryMs`, gets an answer again: no request waits behind a hung server, and the
 * service recovers by itself.
 */
function createMysqlGuard(settings: Record<string, unknown>) {
  const driver = require('mysql2') as { createConnection(options: object): MysqlConnection };
  const inFlight = new Set<(err: Error) => void>();
  let down = false;
  let probing: Promise<boolean> | null = null;
  let recovery: NodeJS.Timeout | null = null;

  function probe(): Promise<boolean> {
    probing ??= new Promise<boolean>((resolve) => {
      const conn = driver.createConnection({ ...settings, connectTimeout: MYSQL_TIMEOUTS.probeMs });
      let done = false;
      const finish = (alive: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        conn.destroy();
        conn.stream.destroy();
        resolve(alive);
      };
      // Belt and braces over the driver's own time-outs (connect, then the query).
      const deadline = setTimeout(() => finish(false), 2 * MYSQL_TIMEOUTS.probeMs + 500);
      deadline.unref();
      conn.on('error', () => finish(false));
      // An error packet (too many connections, access denied) is an answer: the server is alive.
      conn.query({ sql: 'SELECT 1', timeout: MYSQL_TIMEOUTS.probeMs }, (err: (Error & { sqlMessage?: string }) | null) =>
        finish(!err || Boolean(err.sqlMessage)),
      );
    }).finally(() => {
      probing = null;
    });
    return probing;
  }

  function declareDown() {
    down = true;
    for (const fail of [...inFlight]) fail(unresponsive());
    if (recovery) return;
    recovery = setInterval(() => {
      void probe().then((alive) => {
        if (!alive || !recovery) return;
        down = false;
        clearInterval(recovery);
        recovery = null;
      });
    }, MYSQL_TIMEOUTS.recoveryProbeEveryMs);
    recovery.unref();
  }

  const suspect = () => void probe().then((alive) => !alive && declareDown());

  return {
    /**
     * Every raw connection of the pool: knex's queries (transactions included) go through `query`.
     * Library patches 2 and 3 (docs/library-patches.md).
     */
    watch(connection: MysqlConnection) {
      const original = connection.query.bind(connection);
      connection.query = (options: unknown, values: unknown, callback?: unknown) => {
        if (typeof callback !== 'function') return original(options, values, callback);
        const cb = callback as QueryCallback;
        let settled = false;
        let timer: NodeJS.Timeout;
        const settle = () => {
          settled = true;
          clearTimeout(timer);
          inFlight.delete(fail);
        };
        function fail(err: Error) {
          if (settled) return;
          settle();
          // Never reused: the pool's validation drops it, and nothing more is queued on it.
          connection.__knex__disposed = err;
          connection.destroy();
          connection.stream.destroy();
          cb(err);
        }
        const check = () =>
          void probe().then((alive) => {
            if (settled) return;
            if (alive) timer = setTimeout(check, MYSQL_TIMEOUTS.stallCheckMs).unref();
            else declareDown();
          });
        timer = setTimeout(check, MYSQL_TIMEOUTS.stallCheckMs).unref();
        inFlight.add(fail);
        return original(options, values, (err: Error | null, ...rest: unknown[]) => {
          if (settled) return;
          settle();
          cb(err, ...rest);
        });
      };
    },
    /** Fail fast while the server is down; a failed connect makes us check. Library patch 4 (docs/library-patches.md). */
    attach(db: Knex) {
      const client = db.client as { acquireConnection(): Promise<unknown>; destroy(cb?: unknown): Promise<void> };
      const acquire = client.acquireConnection.bind(client);
      client.acquireConnection = async () => {
        if (down) throw unresponsive();
        try {
          return await acquire();
        } catch (err) {
          if (isConnectionError(err)) suspect();
          throw err;
        }
      };
      const destroy = client.destroy.bind(client);
      client.destroy = (cb?: unknown) => {
        if (recovery) clearInterval(recovery);
        recovery = null;
        return destroy(cb);
      };
    },
  };
}

/**
 * Adds `by` to the counter `column` of the one row of `table` whose `keyColumn` is `key` and
 * answers its new value, in one statement (the row stays locked until the transaction ends), or
 * undefined when there is no such row. MySQL hands the value back in the statement's own answer
 * (LAST_INSERT_ID(expr) sets the OK packet's insert id), SQLite through RETURNING: no read after it.
 */
export async function incrementReturning(trx: Knex, table: string, keyColumn: string, key: string, column: string, by = 1): Promise<number | undefined> {
  if (dialectOf(trx) === 'mysql') {
    const [header] = await trx.raw('update ?? set ?? = last_insert_id(?? + ?) where ?? = ?', [table, column, column, by, keyColumn, key]);
    return Number(header.affectedRows) === 1 ? Number(header.insertId) : undefined;
  }
  const rows: Record<string, unknown>[] = await trx.raw('update ?? set ?? = ?? + ? where ?? = ? returning ??', [
    table,
    column,
    column,
    by,
    keyColumn,
    key,
    column,
  ]);
  return rows.length ? Number(rows[0][column]) : undefined;
}

/** `SELECT ... FOR UPDATE` where it means something (MySQL); SQLite serialises writers anyway. */
export function forUpdate<T extends Knex.QueryBuilder>(db: Knex, query: T): T {
  return dialectOf(db) === 'mysql' ? (query.forUpdate() as T) : query;
}

/**
 * `SELECT ... FOR UPDATE SKIP LOCKED` on MySQL: rows another transaction holds are passed over, so
 * concurrent claimers take different rows without waiting on each other. SQLite has no row locks
 * (one writer at a time): a plain read, and the claimer's conditional UPDATE decides.
 */
export function forUpdateSkipLocked<T extends Knex.QueryBuilder>(db: Knex, query: T): T {
  return dialectOf(db) === 'mysql' ? (query.forUpdate().skipLocked() as T) : query;
}

/**
 * A row as the driver hands it, with its numeric columns made numbers: both drivers return text as
 * text, but mysql2 may hand BIGINT back as a string. NULL stays null. Every store's row mapping uses it.
 */
export function withNumericColumns<Row extends object>(row: Row, columns: (keyof Row & string)[]): Row {
  const out = { ...row } as Record<string, unknown>;
  for (const c of columns) out[c] = out[c] === null || out[c] === undefined ? null : Number(out[c]);
  return out as Row;
}
