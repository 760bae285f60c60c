import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import { claimDueRows, type QueueTable } from '../delivery/claim-due';
import { runInTransaction } from '../db/transaction';
import type { DeliveryState } from '../delivery/rows';
import type { ClaimRequest, EngineClaim, EngineOutcome } from '../delivery/engine';

/**
 * The mail queue's queries: `emails` is read and written here and nowhere else. One row is one
 * email: queued in the transaction of the change that causes it (insertEmail), claimed and
 * recorded by the delivery worker (claimDue, finishAttempts), listed as the site's mail log.
 */

export interface EmailRow extends DeliveryState {
  id: string;
  site_id: string | null;
  recipient: string;
  template: string;
  /** The template's values, sealed; null once the email was sent or given up (no bodies are kept). */
  values_sealed: string | null;
  message_id: string;
  last_error: string | null;
  created_at: number;
}

export function mapEmailRow(r: Record<string, unknown>): EmailRow {
  return withNumericColumns(r as unknown as EmailRow, ['attempts', 'round_base', 'next_attempt_at', 'lease_until', 'created_at', 'updated_at']);
}

/** A claimed email: the engine's view of it and the row its claim read. */
export interface EmailClaim extends EngineClaim {
  email: EmailRow;
}

/** What an attempt leaves in the row: the relay's complaint, or null once it took the email. */
export interface EmailAttemptRow {
  error: string | null;
}

/** Every email goes through one relay: the engine caps the attempts in flight to it. */
export const RELAY = 'relay';

/** The log text of an attempt whose worker stopped (or lost its lease) before reporting back. */
export const INTERRUPTED = 'interrupted: the worker stopped during the attempt';

/** Queues an email in the caller's transaction: it exists if and only if the change that causes it commits. */
export async function insertEmail(trx: Knex.Transaction, row: EmailRow): Promise<void> {
  await trx('emails').insert(row);
}

const EMAILS: QueueTable<EmailRow> = { table: 'emails', key: 'id', address: RELAY, map: mapEmailRow, interruptible: true };

export function createMailStore(db: Knex) {
  return {
    /**
     * Claims up to `limit` due emails for `owner`, as the event store claims deliveries (see
     * claimDueRows). There is one address (the relay), so the allowance is one number.
     */
    async claimDue(req: ClaimRequest): Promise<{ claimed: EmailClaim[]; filled: string[] }> {
      return claimDueRows(db, EMAILS, req, (base, email) => ({ ...base, email }));
    },

    /**
     * Records the results of one group in one commit. A row changes only while it is still this
     * claim's (leased by `owner`, at the attempt number sent); an email that ended keeps no values.
     */
    async finishAttempts(owner: string, outcomes: EngineOutcome<EmailAttemptRow>[]): Promise<boolean[]> {
      return runInTransaction(db, async (trx) => {
        const applied: boolean[] = [];
        for (const o of outcomes) {
          const ended = o.next.status !== 'pending';
          const n = await trx('emails')
            .where({ id: o.key, lease_owner: owner, attempts: o.attempt })
            .update({
              status: o.next.status,
              next_attempt_at: o.next.nextAttemptAt,
              attempts: o.next.attempts ?? o.attempt,
              lease_owner: null,
              lease_until: null,
              updated_at: o.next.now,
              ...(o.row ? { last_error: o.row.error } : {}),
              ...(o.next.unsentReason !== undefined ? { last_error: o.next.unsentReason } : {}),
              ...(ended ? { values_sealed: null } : {}),
            });
          applied.push(Number(n) === 1);
        }
        return applied;
      });
    },

    /** Notes an attempt that never reported back, unless a later result says more. */
    async logInterrupted(id: string): Promise<void> {
      await db('emails').where({ id }).whereNull('last_error').update({ last_error: INTERRUPTED });
    },

    /** A site's mail log, newest first, keyset-paged by (created_at, id). */
    async listForSite(siteId: string, opts: { limit: number; before?: { createdAt: number; id: string } }): Promise<EmailRow[]> {
      let q = db('emails')
        .where('site_id', siteId)
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(opts.limit);
      const b = opts.before;
      if (b) q = q.andWhere((w) => w.where('created_at', '<', b.createdAt).orWhere((x) => x.where('created_at', b.createdAt).andWhere('id', '<', b.id)));
      return (await q).map(mapEmailRow);
    },

    async find(id: string): Promise<EmailRow | undefined> {
      const r = await db('emails').where({ id }).first();
      return r && mapEmailRow(r);
    },

    /** The log's retention: emails that ended before `cutoff`, in small batches. */
    async removeEndedBefore(cutoff: number, batch = 500): Promise<number> {
      let total = 0;
      for (;;) {
        const ids: string[] = await db('emails').whereIn('status', ['delivered', 'failed']).andWhere('updated_at', '<', cutoff).limit(batch).pluck('id');
        if (!ids.length) return total;
        total += Number(await db('emails').whereIn('id', ids).whereIn('status', ['delivered', 'failed']).del());
        if (ids.length < batch) return total;
      }
    },
  };
}

export type MailStore = ReturnType<typeof createMailStore>;
