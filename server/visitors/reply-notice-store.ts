import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import { claimDueRows } from '../delivery/claim-due';
import { pendingState, type DeliveryState } from '../delivery/rows';
import type { ClaimRequest, EngineClaim, EngineOutcome } from '../delivery/engine';
import { newId } from '../platform/ids';

/**
 * `reply_notices` (034_away.ts): one row per conversation whose agent replies wait to be emailed
 * to its visitor, claimed by the delivery engine like an email (lease, fencing), so one instance
 * sends it. The only reader and writer of the table.
 */
export interface ReplyNoticeRow extends DeliveryState {
  id: string;
  site_id: string;
  conversation_id: string;
  visitor_id: string;
  last_error: string | null;
  created_at: number;
}

export interface ReplyNoticeClaim extends EngineClaim {
  notice: ReplyNoticeRow;
}

/** One address: the engine caps the notices handled at once by one number. */
export const NOTICES = 'reply-notices';

const mapRow = (r: Record<string, unknown>): ReplyNoticeRow =>
  withNumericColumns(r as unknown as ReplyNoticeRow, ['attempts', 'round_base', 'next_attempt_at', 'lease_until', 'created_at', 'updated_at']);

export function createReplyNoticeStore(db: Knex) {
  return {
    /** A pending notice for the conversation, due at `dueAt`, unless one is pending already (it carries this reply too). */
    async start(trx: Knex.Transaction, n: { siteId: string; conversationId: string; visitorId: string }, now: number, dueAt: number): Promise<boolean> {
      const pending = await trx('reply_notices').where({ conversation_id: n.conversationId, status: 'pending' }).first('id');
      if (pending) return false;
      await trx('reply_notices').insert({
        id: newId('rpn', now),
        site_id: n.siteId,
        conversation_id: n.conversationId,
        visitor_id: n.visitorId,
        last_error: null,
        created_at: now,
        ...pendingState(now),
        next_attempt_at: dueAt,
      });
      return true;
    },

    claimDue: (req: ClaimRequest) =>
      claimDueRows(db, { table: 'reply_notices', key: 'id', address: NOTICES, map: mapRow, interruptible: true }, req, (base, notice): ReplyNoticeClaim => ({
        ...base,
        notice,
      })),

    /**
     * Ends a notice inside the transaction that queues its email, while the claim still holds it
     * (fencing): false when a newer claim took it meanwhile, and the caller rolls back.
     */
    async endHeld(trx: Knex.Transaction, claim: ReplyNoticeClaim, note: string | null, now: number): Promise<boolean> {
      const n = await trx('reply_notices')
        .where({ id: claim.key, lease_owner: claim.notice.lease_owner, attempts: claim.attempt })
        .update({ status: 'delivered', last_error: note, updated_at: now });
      return Number(n) === 1;
    },

    /** Records the engine's results; a notice ended by endHeld stays ended. */
    async finishAttempts(owner: string, outcomes: EngineOutcome<{ error: string | null }>[]): Promise<boolean[]> {
      return runInTransaction(db, async (trx) => {
        const applied: boolean[] = [];
        for (const o of outcomes) {
          const n = await trx('reply_notices')
            .where({ id: o.key, lease_owner: owner, attempts: o.attempt })
            .update({
              status: trx.raw("CASE WHEN status = 'delivered' THEN status ELSE ? END", [o.next.status]),
              next_attempt_at: o.next.nextAttemptAt,
              attempts: o.next.attempts ?? o.attempt,
              lease_owner: null,
              lease_until: null,
              updated_at: o.next.now,
              ...(o.row?.error ? { last_error: o.row.error } : {}),
              ...(o.next.unsentReason !== undefined ? { last_error: o.next.unsentReason } : {}),
            });
          applied.push(Number(n) === 1);
        }
        return applied;
      });
    },

    /** Retention: notices that ended before `cutoff`. */
    async removeEndedBefore(cutoff: number): Promise<number> {
      const ids: string[] = await db('reply_notices').whereIn('status', ['delivered', 'failed']).andWhere('updated_at', '<', cutoff).limit(500).pluck('id');
      return ids.length ? Number(await db('reply_notices').whereIn('id', ids).delete()) : 0;
    },

    /** Deleting a visitor's data: its conversations' notices. */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      return Number(await trx('reply_notices').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete());
    },
  };
}

export type ReplyNoticeStore = ReturnType<typeof createReplyNoticeStore>;
