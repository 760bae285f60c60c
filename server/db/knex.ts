import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { Knex } from 'knex';
import { migrationSource } from './migrations';

export type Db = Knex;
export type Dialect = 'sqlite' | 'mysql';

export function dialectOf(db: Knex): Dialect {
  const client = String(db.client.config.client);
  return client.includes('mysql') ? 'mysql' : 'sqlite';
}

/**
 * One Knex instance. SQLite by default (file in DATA_DIR), MySQL/MariaDB when DATABASE_URL is
 * `mysql://...`. SQLite runs in WAL mode with a busy timeout, one connection, so concurrent
 * requests queue inside Knex instead of failing with SQLITE_BUSY.
 */
export function createDb(opts: { databaseUrl?: string; dataDir: string }): Knex {
  if (opts.databaseUrl) {
    const url = new URL(opts.databaseUrl);
    if (url.protocol !== 'mysql:' && url.protocol !== 'mariadb:') {
      throw new Error(`DATABASE_URL must be mysql://user:pass@host:3306/db, got protocol ${url.protocol}`);
    }
    return knexFactory({
      client: 'mysql2',
      connection: {
        host: url.hostname,
        port: Number(url.port || 3306),
        user: decodeURIComponent(url.username),
        password: decodeURIComponent(url.password),
        database: url.pathname.replace(/^\//, ''),
        charset: 'utf8mb4',
        // Times are integer milliseconds in BIGINT columns; keep them numbers.
        supportBigNumbers: true,
        bigNumberStrings: false,
        connectTimeout: 5000,
      },
      pool: { min: 0, max: 10 },
      acquireConnectionTimeout: 5000,
    });
  }
  fs.mkdirSync(opts.dataDir, { recursive: true });
  return knexFactory({
    client: 'better-sqlite3',
    connection: { filename: path.join(opts.dataDir, 'chat.sqlite3') },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: { pragma(s: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
        conn.pragma('journal_mode = WAL');
        conn.pragma('busy_timeout = 5000');
        conn.pragma('foreign_keys = ON');
        conn.pragma('synchronous = NORMAL');
        done(null, conn);
      },
    },
  });
}

export async function migrate(db: Knex): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

/** Is this error a violation of a unique index? (Used for lock-free "insert or find" races.) */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ER_DUP_ENTRY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Is this error the database being unreachable (as opposed to a bad query)? */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string };
  if (!e) return false;
  if (e.name === 'KnexTimeoutError') return true;
  const codes = ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'PROTOCOL_CONNECTION_LOST', 'ER_CON_COUNT_ERROR', 'EHOSTUNREACH', 'SQLITE_CANTOPEN', 'SQLITE_BUSY', 'ER_ACCESS_DENIED_ERROR', 'ER_BAD_DB_ERROR'];
  if (e.code && codes.includes(e.code)) return true;
  return /Unable to acquire a connection|The pool is probably full|aborted|database connection is not open/i.test(e.message ?? '');
}

/** `SELECT ... FOR UPDATE` where it means something (MySQL); SQLite serialises writers anyway. */
export function forUpdate<T extends Knex.QueryBuilder>(db: Knex, query: T): T {
  return dialectOf(db) === 'mysql' ? (query.forUpdate() as T) : query;
}
