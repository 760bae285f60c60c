import type { Knex } from 'knex';
import { forUpdateSkipLocked } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import { claimChanges, type DeliveryState } from './rows';
import type { ClaimRequest, EngineClaim } from './engine';

/** A queue table of one address (the mail relay, the reply notices, the waiting-visitor checks). */
export interface QueueTable<R> {
  table: string;
  /** The row's key column (its id, or the conversation a check is of). */
  key: keyof R & string;
  /** The one address of the queue: the engine caps the claims in flight to it. */
  address: string;
  map: (raw: Record<string, unknown>) => R;
  /**
   * Whether a claim reports the attempt an earlier claim never reported back (a send that may have
   * happened, logged as interrupted). A check that only reads and queues in one transaction has none.
   */
  interruptible: boolean;
}

/**
 * A claim over a queue table: a locking read that skips other workers' rows (MySQL), one UPDATE
 * that counts the attempt and takes the lease, one read of what was taken. `claim` makes the
 * provider's claim of each row taken.
 */
export async function claimDueRows<R extends DeliveryState, C extends EngineClaim>(
  db: Knex,
  queue: QueueTable<R>,
  req: ClaimRequest,
  claim: (base: EngineClaim, row: R) => C,
): Promise<{ claimed: C[]; filled: string[] }> {
  const { table, key, address, map } = queue;
  const { owner, now, leaseMs, maxAttempts } = req;
  const limit = Math.min(req.limit, req.allowance(address) - (req.held.get(address) ?? 0));
  if (limit <= 0) return { claimed: [], filled: [] };
  const own = [...(req.exclude ?? [])];
  const leaseUntil = now + leaseMs;
  return runInTransaction(
    db,
    async (q) => {
      let select = q(table).where('status', 'pending').andWhere('next_attempt_at', '<=', now).orderBy('next_attempt_at').limit(limit);
      if (own.length) select = select.whereNotIn(key, own);
      const before = (await forUpdateSkipLocked(q, select)).map(map);
      if (!before.length) return { claimed: [], filled: [] };
      const ids = before.map((r) => String(r[key]));
      await q(table)
        .whereIn(key, ids)
        .andWhere('status', 'pending')
        .andWhere('next_attempt_at', '<=', now)
        .update(claimChanges(q, { owner, now, leaseUntil, maxAttempts }));
      const taken = new Map(
        (await q(table).whereIn(key, ids).andWhere({ lease_owner: owner, lease_until: leaseUntil })).map((r: Record<string, unknown>) => {
          const row = map(r);
          return [String(row[key]), row] as const;
        }),
      );
      const claimed: C[] = [];
      for (const b of before) {
        const row = taken.get(String(b[key]));
        if (!row) continue;
        const base: EngineClaim = {
          key: String(row[key]),
          address,
          attempt: row.attempts,
          leaseUntil,
          roundBase: row.round_base,
          interrupted: queue.interruptible && b.lease_owner ? { attempt: b.attempts, startedAt: b.updated_at, leaseUntil: b.lease_until ?? now } : null,
          exhausted: b.attempts - b.round_base >= maxAttempts,
        };
        claimed.push(claim(base, row));
      }
      return { claimed, filled: [] };
    },
    { isolation: 'read committed', whenBusy: 'rethrow' },
  );
}
