import type { Knex } from 'knex';
import { ApiError } from '../platform/errors';

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

/**
 * Runs `work` in a transaction and retries it (a few times, with a short random pause) when it lost
 * to another writer (see isContention). When every attempt lost, the client is told to come back:
 * 503 `service_unavailable` with Retry-After, never a 500. On SQLite, knex.ts starts these
 * transactions with BEGIN IMMEDIATE, so the write lock is taken (or waited for) before the first read.
 */
export async function runInTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await db.transaction(work);
    } catch (err) {
      if (!isContention(err)) throw err;
      if (i >= attempts) {
        throw new ApiError('service_unavailable', 'The database is busy with other writers; retry in a moment.', undefined, { 'Retry-After': '1' });
      }
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * i));
    }
  }
}
