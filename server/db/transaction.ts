import type { Knex } from 'knex';

const RETRYABLE = new Set(['ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT', 'SQLITE_BUSY']);

/**
 * Runs `work` in a transaction and retries it (a few times, with a short random pause) when the
 * database chose it as a deadlock victim: with row locks on MySQL that is a normal outcome of two
 * writers meeting, not an error for the client.
 */
export async function runInTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await db.transaction(work);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (i >= attempts || !code || !RETRYABLE.has(code)) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * i));
    }
  }
}
