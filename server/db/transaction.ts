import type { Knex } from 'knex';
import { ApiError } from '../platform/errors';
import { dialectOf } from './knex';

/**
 * Contention between writers, not a fault: MySQL's deadlock victim and lock wait time-out, and every
 * SQLite SQLITE_BUSY* (another process, the CLI or `npm run worker`, held the write lock past the busy
 * time-out, or committed after this transaction's snapshot: SQLITE_BUSY_SNAPSHOT).
 */
export function isContention(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT' || code.startsWith('SQLITE_BUSY');
}

export interface TransactionOptions {
  /** How many times `work` runs when it keeps losing to other writers. */
  attempts?: number;
  /**
   * MySQL's isolation level for this transaction (its default is REPEATABLE READ). SQLite
   * transactions are always serialisable, so it is not asked for there.
   */
  isolation?: 'read committed';
  /**
   * When every attempt lost: `unavailable` (a request's work) tells the client to come back, 503
   * `service_unavailable` with Retry-After; `rethrow` (background work, which retries on its own
   * schedule) gets the database's own last error, so its log says what happened in the database.
   */
  whenBusy?: 'unavailable' | 'rethrow';
}

/**
 * Runs `work` in a transaction and retries it (a few times, with a short random pause) when it lost
 * to another writer (see isContention); `whenBusy` says what happens when every attempt lost, by
 * default a 503, never a 500. On SQLite, knex.ts starts these transactions with BEGIN IMMEDIATE, so
 * the write lock is taken (or waited for) before the first read.
 */
export async function runInTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  const { attempts = 4, isolation, whenBusy = 'unavailable' } = options;
  const config = isolation && dialectOf(db) === 'mysql' ? { isolationLevel: isolation } : undefined;
  for (let i = 1; ; i++) {
    try {
      return await db.transaction(work, config);
    } catch (err) {
      if (!isContention(err)) throw err;
      if (i >= attempts) {
        if (whenBusy === 'rethrow') throw err;
        throw new ApiError('service_unavailable', 'The database is busy with other writers; retry in a moment.', undefined, { 'Retry-After': '1' });
      }
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * i));
    }
  }
}
