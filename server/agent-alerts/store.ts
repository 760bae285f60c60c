import type { Knex } from 'knex';
import { isUniqueViolation, withNumericColumns } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import { claimDueRows } from '../delivery/claim-due';
import type { DeliveryState } from '../delivery/rows';
import type { ClaimRequest, EngineClaim, EngineOutcome } from '../delivery/engine';
import { DEFAULT_MODE, DEFAULT_WAIT_MINUTES, type AlertMode, type MemberAlertState } from './rules';

/**
 * The tables of agents' alerts (033): members' settings, when each member was last emailed of each
 * conversation, and the scheduled checks of waiting conversations. Read and written here only.
 */

export interface AlertSetting {
  mode: AlertMode;
  waitMinutes: number;
}

/** A member of the site with their alert setting (the default without a row) and address. */
export interface AlertMember extends MemberAlertState {
  email: string;
}

export interface CheckRow extends DeliveryState {
  conversation_id: string;
  site_id: string;
}

export interface CheckClaim extends EngineClaim {
  check: CheckRow;
}

/** Every check runs against the database alone: one address for the engine's caps. */
const CHECKS = 'checks';

const mapCheck = (r: Record<string, unknown>) =>
  withNumericColumns(r as unknown as CheckRow, ['attempts', 'round_base', 'next_attempt_at', 'lease_until', 'updated_at']);

export function createAlertStore(db: Knex) {
  return {
    async setting(siteId: string, accountId: string, trx: Knex = db): Promise<AlertSetting> {
      const r = await trx('member_alert_settings').where({ site_id: siteId, account_id: accountId }).first('mode', 'wait_minutes');
      return r ? { mode: r.mode as AlertMode, waitMinutes: Number(r.wait_minutes) } : { mode: DEFAULT_MODE, waitMinutes: DEFAULT_WAIT_MINUTES };
    },

    async saveSetting(trx: Knex, siteId: string, accountId: string, s: AlertSetting, at: number): Promise<void> {
      const values = { mode: s.mode, wait_minutes: s.waitMinutes, updated_at: at };
      const n = await trx('member_alert_settings').where({ site_id: siteId, account_id: accountId }).update(values);
      if (Number(n) > 0) return;
      try {
        await trx('member_alert_settings').insert({ site_id: siteId, account_id: accountId, ...values });
      } catch (err) {
        // Two saves at once: the other's row is there now, and this one is the later change.
        if (!isUniqueViolation(err)) throw err;
        await trx('member_alert_settings').where({ site_id: siteId, account_id: accountId }).update(values);
      }
    },

    /** The site's members with their settings, addresses and when each was last emailed of the conversation. */
    async members(trx: Knex, siteId: string, conversationId: string): Promise<AlertMember[]> {
      const rows = await trx('memberships as m')
        .join('accounts as a', 'a.id', 'm.account_id')
        .leftJoin('member_alert_settings as s', (j) => j.on('s.site_id', 'm.site_id').andOn('s.account_id', 'm.account_id'))
        .leftJoin('agent_alerts_sent as x', (j) => j.on('x.account_id', 'm.account_id').andOn('x.conversation_id', trx.raw('?', [conversationId])))
        .where('m.site_id', siteId)
        .orderBy('m.account_id')
        .select('m.account_id', 'a.email', 's.mode', 's.wait_minutes', 'x.sent_at');
      return rows.map((r: Record<string, unknown>) => ({
        accountId: String(r.account_id),
        email: String(r.email),
        mode: (r.mode as AlertMode | null) ?? DEFAULT_MODE,
        waitMinutes: r.wait_minutes === null ? DEFAULT_WAIT_MINUTES : Number(r.wait_minutes),
        lastSentAt: r.sent_at === null || r.sent_at === undefined ? null : Number(r.sent_at),
      }));
    },

    /**
     * One upsert: an UPDATE of a row that does not exist yet takes a gap lock on InnoDB, and new
     * conversations (ids in time order) share the last gap, so concurrent first messages of a site
     * deadlocked on the INSERT that followed it.
     */
    async recordSent(trx: Knex, siteId: string, conversationId: string, accountIds: string[], at: number): Promise<void> {
      if (!accountIds.length) return;
      await trx('agent_alerts_sent')
        .insert(accountIds.map((accountId) => ({ conversation_id: conversationId, account_id: accountId, site_id: siteId, sent_at: at })))
        .onConflict(['conversation_id', 'account_id'])
        .merge(['sent_at']);
    },

    /**
     * When the visitor has waited since: their first message after the last member's (or API's)
     * reply; null when the last message is not theirs.
     */
    async waitingSince(trx: Knex, conversationId: string): Promise<number | null> {
      const lastOut = await trx('messages').where({ conversation_id: conversationId, direction: 'outgoing' }).max({ at: 'created_at' }).first();
      const after = lastOut?.at === null || lastOut?.at === undefined ? -1 : Number(lastOut.at);
      const first = await trx('messages')
        .where({ conversation_id: conversationId, direction: 'incoming' })
        .andWhere('created_at', '>', after)
        .min({ at: 'created_at' })
        .first();
      return first?.at === null || first?.at === undefined ? null : Number(first.at);
    },

    /** The conversation's last messages, oldest first. */
    async lastMessages(trx: Knex, conversationId: string, limit: number): Promise<{ direction: string; content: string; format: string }[]> {
      const rows = await trx('messages')
        .where({ conversation_id: conversationId })
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(limit)
        .select('direction', 'content', 'format');
      return rows.reverse();
    },

    /**
     * Makes the conversation's check due by `dueAt` at the latest: a pending check keeps its earlier
     * time, an ended one starts again with a fresh attempt budget. A check running now may be
     * claimed again at `dueAt`; its late result is then fenced off like any delivery's.
     */
    async scheduleCheck(trx: Knex, siteId: string, conversationId: string, dueAt: number, at: number): Promise<void> {
      const row = await trx('agent_alert_checks').where({ conversation_id: conversationId }).first('status', 'next_attempt_at', 'attempts');
      if (!row) {
        await trx('agent_alert_checks').insert({
          conversation_id: conversationId,
          site_id: siteId,
          status: 'pending',
          attempts: 0,
          round_base: 0,
          next_attempt_at: dueAt,
          lease_owner: null,
          lease_until: null,
          updated_at: at,
        });
        return;
      }
      if (row.status === 'pending' && Number(row.next_attempt_at) <= dueAt) return;
      await trx('agent_alert_checks')
        .where({ conversation_id: conversationId })
        .update({ status: 'pending', next_attempt_at: dueAt, round_base: Number(row.attempts), updated_at: at });
    },

    /** Claims due checks, as the mail store claims emails (skip-locked read, one UPDATE, the lease). */
    claimDue: (req: ClaimRequest): Promise<{ claimed: CheckClaim[]; filled: string[] }> =>
      claimDueRows(db, { table: 'agent_alert_checks', key: 'conversation_id', address: CHECKS, map: mapCheck, interruptible: false }, req, (base, check) => ({
        ...base,
        check,
      })),

    /** A check's result: due again (a fresh budget when it ran), or ended; only while the claim is still its own. */
    async finishAttempts(owner: string, outcomes: EngineOutcome<{ ran: boolean }>[]): Promise<boolean[]> {
      return runInTransaction(db, async (trx) => {
        const applied: boolean[] = [];
        for (const o of outcomes) {
          const attempts = o.next.attempts ?? o.attempt;
          const n = await trx('agent_alert_checks')
            .where({ conversation_id: o.key, lease_owner: owner, attempts: o.attempt })
            .update({
              status: o.next.status,
              next_attempt_at: o.next.nextAttemptAt,
              attempts,
              ...(o.row?.ran ? { round_base: attempts } : {}),
              lease_owner: null,
              lease_until: null,
              updated_at: o.next.now,
            });
          applied.push(Number(n) === 1);
        }
        return applied;
      });
    },

    /** Deleting a visitor's data: the checks and sent marks of their conversations. */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      const a = await trx('agent_alert_checks').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete();
      const b = await trx('agent_alerts_sent').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete();
      return Number(a) + Number(b);
    },

    /** Maintenance: ended checks and sent marks older than `cutoff` (the period is long over). */
    async purge(cutoff: number): Promise<number> {
      const a = await db('agent_alert_checks').whereIn('status', ['delivered', 'failed']).andWhere('updated_at', '<', cutoff).del();
      const b = await db('agent_alerts_sent').where('sent_at', '<', cutoff).del();
      return Number(a) + Number(b);
    },
  };
}

export type AlertStore = ReturnType<typeof createAlertStore>;
