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

const commitHooks = new WeakMap<Knex.Transaction, (() => void)[]>();
const lastWrites = new WeakMap<Knex.Transaction, (() => Promise<void>)[]>();

/** The transaction `trx` is part of (a savepoint's outermost one), if runInTransaction opened it. */
function outermostOf(trx: Knex.Transaction): Knex.Transaction {
  let outermost = trx;
  while (outermost.parentTransaction) outermost = outermost.parentTransaction;
  return outermost;
}

/**
 * Runs `write` in the transaction `trx` belongs to as its last statements, after the work and right
 * before the commit, in the order registered; a failure rolls the transaction back like any other.
 * For a write under a lock that every writer of a row takes (a site's inbox feed counter): taken
 * last, it is held for that write and the commit alone, not for the rest of the work. Only for
 * transactions opened by runInTransaction (any other is refused with an error, as afterCommit does).
 */
export function lastInTransaction(trx: Knex.Transaction, write: () => Promise<void>): void {
  const writes = lastWrites.get(outermostOf(trx));
  if (!writes) throw new Error('lastInTransaction: the transaction was not opened by runInTransaction');
  writes.push(write);
}

/**
 * Runs `callback` once the transaction `trx` belongs to has committed, right before
 * runInTransaction returns; never when it rolled back, failed to commit, or lost to another writer
 * and was retried (the retry registers its own). Only for transactions opened by runInTransaction,
 * the one place that knows the commit happened; any other transaction is refused with an error,
 * which rolls it back. A savepoint (`trx.transaction(...)`) counts as its outermost transaction.
 */
export function afterCommit(trx: Knex.Transaction, callback: () => void): void {
  const hooks = commitHooks.get(outermostOf(trx));
  if (!hooks) throw new Error('afterCommit: the transaction was not opened by runInTransaction');
  hooks.push(callback);
}

/** A hook's failure must not make a committed write look failed (its caller would retry it). */
function runHooks(hooks: (() => void)[]) {
  for (const hook of hooks) {
    try {
      hook();
    } catch {
      // the hook's own concern: the write is committed either way
    }
  }
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
    // Each attempt has hooks of its own: what a lost attempt registered is dropped with it.
    const hooks: (() => void)[] = [];
    try {
      const value = await db.transaction(async (trx) => {
        commitHooks.set(trx, hooks);
        const writes: (() => Promise<void>)[] = [];
        lastWrites.set(trx, writes);
        const result = await work(trx);
        // `work` ended the transaction itself: knex settles a `trx.rollback()` without an error
        // exactly like a commit, so whether anything was committed is not known here.
        if (trx.isCompleted()) hooks.length = 0;
        // A last write may register another (each runs once, in order).
        else for (let w = 0; w < writes.length; w++) await writes[w]();
        return result;
      }, config);
      runHooks(hooks);
      return value;
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
