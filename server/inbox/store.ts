import type { Knex } from 'knex';
import { forUpdate, isUniqueViolation } from '../db/knex';

/** A row of a site's inbox feed: a public event it mirrors (`event_id`), or a private change (`body`). */
export interface ActivityRow {
  site_id: string;
  position: number;
  kind: string;
  conversation_id: string;
  event_id: string | null;
  account_id: string | null;
  body: string | null;
  created_at: number;
}

export interface ReadMarkRow {
  account_id: string;
  conversation_id: string;
  site_id: string;
  last_read_at: number;
  last_read_message_id: string | null;
  updated_at: number;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** An unread count stops here (the dashboard shows it as "999+"): counting further would read a long unread history on every list page. */
export const UNREAD_COUNT_CAP = 999;

/** A member's read mark beside a conversation of a list (`joinReadMarks`): null when they never read it. */
export interface ReadMarkColumns {
  read_at: number | null;
  read_message_id: string | null;
}

/**
 * Beside each conversation of `q` (a query on `conversations`), `accountId`'s read mark as
 * ReadMarkColumns: one primary-key look-up of `inbox_reads` per row, in the list's own statement.
 */
export function joinReadMarks(db: Knex, q: Knex.QueryBuilder, accountId: string): Knex.QueryBuilder {
  return q
    .leftJoin('inbox_reads', (j) => j.on('inbox_reads.conversation_id', '=', 'conversations.id').andOn('inbox_reads.account_id', '=', db.raw('?', [accountId])))
    .select('inbox_reads.last_read_at as read_at', 'inbox_reads.last_read_message_id as read_message_id');
}

/** The unread filter of a conversation list joined with the member's marks: a message after the mark, or never read. */
export function whereUnread(db: Knex, q: Knex.QueryBuilder): Knex.QueryBuilder {
  return q
    .whereNotNull('conversations.last_message_at')
    .andWhere((w) => w.whereNull('inbox_reads.last_read_at').orWhere('conversations.last_message_at', '>', db.ref('inbox_reads.last_read_at')));
}

/**
 * The inbox's tables (011_inbox.ts): read marks, the site's feed and its position counter. The
 * assignee is a column of `conversations`, written by the conversation store.
 */
export function createInboxStore(db: Knex) {
  /**
   * The site's next feed position, taken under the lock of the site's counter row, held until the
   * caller's transaction ends: positions of a site commit in their order, so a reader that has seen
   * position n has seen (or will never see) every position below it, and a rolled-back change
   * gives its number back. The row is made by the site's first change; two first changes at once
   * meet on its primary key and the loser bumps the winner's row.
   */
  async function nextPosition(trx: Knex.Transaction, siteId: string): Promise<number> {
    const bump = () =>
      trx('inbox_positions')
        .where({ site_id: siteId })
        .update({ position: trx.raw('?? + 1', ['position']) });
    if (Number(await bump()) === 0) {
      try {
        await trx('inbox_positions').insert({ site_id: siteId, position: 1 });
        return 1;
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        await bump();
      }
    }
    const row = await trx('inbox_positions').where({ site_id: siteId }).first('position');
    return Number(row.position);
  }

  return {
    db,

    /** Appends to the site's feed in the change's transaction; answers the position. */
    async append(trx: Knex.Transaction, row: Omit<ActivityRow, 'position'>): Promise<number> {
      const position = await nextPosition(trx, row.site_id);
      await trx('inbox_activity').insert({ ...row, position });
      return position;
    },

    /** The site's newest feed position (0 before its first change). */
    async tail(siteId: string): Promise<number> {
      const row = await db('inbox_positions').where({ site_id: siteId }).first('position');
      return row ? Number(row.position) : 0;
    },

    /** The newest positions of these sites, in one read (the live hub's poll). */
    async tails(siteIds: string[]): Promise<Map<string, number>> {
      const rows: { site_id: string; position: unknown }[] = await db('inbox_positions').whereIn('site_id', siteIds).select('site_id', 'position');
      return new Map(rows.map((r) => [r.site_id, Number(r.position)]));
    },

    /** Up to `limit` feed rows after `after`, in order, each with its public event's body when it mirrors one. */
    async after(siteId: string, after: number, limit: number): Promise<(ActivityRow & { event_body: string | null })[]> {
      const rows = await db('inbox_activity as a')
        .leftJoin('events as e', 'e.id', 'a.event_id')
        .where('a.site_id', siteId)
        .andWhere('a.position', '>', after)
        .orderBy('a.position', 'asc')
        .limit(limit)
        .select('a.site_id', 'a.position', 'a.kind', 'a.conversation_id', 'a.event_id', 'a.account_id', 'a.body', 'a.created_at', 'e.body as event_body');
      return rows.map((r: ActivityRow & { event_body: string | null }) => ({ ...r, position: Number(r.position), created_at: Number(r.created_at) }));
    },

    /** Feed rows older than `before` go (maintenance); a stream resuming before them starts at the tail. */
    purgeActivity: (before: number) => db('inbox_activity').where('created_at', '<', before).delete(),

    /** Deleting a visitor's data: the read marks and feed rows of these conversations of the site. */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      const reads = Number(await trx('inbox_reads').whereIn('conversation_id', conversationIds).andWhere('site_id', siteId).delete());
      return reads + Number(await trx('inbox_activity').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete());
    },

    /**
     * Per conversation, the messages after the member's read mark (`marks`: its time, absent when never read) that the
     * member did not write, counted up to UNREAD_COUNT_CAP. One statement: a UNION ALL of one count
     * per conversation, each over a range of messages_conversation_created that starts at its mark
     * and stops at the cap, so a long conversation read up to near its end, or never read, costs
     * what its unread part (at most the cap) costs, not its whole history.
     */
    async unreadCounts(accountId: string, conversationIds: string[], marks: Map<string, number>): Promise<Map<string, number>> {
      if (!conversationIds.length) return new Map();
      const counts = conversationIds.map((id) => {
        const unread = db('messages')
          .where('conversation_id', id)
          .andWhere((w) => w.whereNull('author_id').orWhere('author_id', '<>', accountId))
          .limit(UNREAD_COUNT_CAP)
          .select('conversation_id');
        const mark = marks.get(id);
        if (mark !== undefined) unread.andWhere('created_at', '>', mark);
        // One row per part; its id is null when nothing is unread (read as 0). No GROUP BY: Knex
        // writes a compound query's GROUP BY after the UNION, where it would group the whole.
        return db.from(unread.as('u')).select(db.raw('max(u.conversation_id) as conversation_id'), db.raw('count(*) as n'));
      });
      const [first, ...rest] = counts;
      // Not wrapped in parentheses: SQLite refuses a parenthesised SELECT in a compound one.
      const rows: { conversation_id: string | null; n: unknown }[] = await (rest.length ? first.unionAll(rest) : first);
      return new Map(rows.filter((r) => r.conversation_id !== null).map((r) => [r.conversation_id!, Number(r.n)]));
    },

    /** The newest message of a conversation: what "read" marks up to. */
    async newestMessage(conversationId: string, trx: Knex = db): Promise<{ id: string; created_at: number } | undefined> {
      const r = await trx('messages')
        .where({ conversation_id: conversationId })
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .first('id', 'created_at');
      return r && { id: r.id, created_at: Number(r.created_at) };
    },

    /** Sets the member's mark, never backwards; answers the mark now stored. */
    async markRead(trx: Knex.Transaction, mark: ReadMarkRow): Promise<ReadMarkRow> {
      const key = { account_id: mark.account_id, conversation_id: mark.conversation_id };
      const moved = await trx('inbox_reads')
        .where(key)
        .andWhere('last_read_at', '<', mark.last_read_at)
        .update({ last_read_at: mark.last_read_at, last_read_message_id: mark.last_read_message_id, updated_at: mark.updated_at });
      if (Number(moved) === 0) {
        try {
          await trx('inbox_reads').insert(mark);
        } catch (err) {
          if (!isUniqueViolation(err)) throw err; // a mark at or past this one is there already
        }
      }
      // A locking read: a plain one on MySQL reads the transaction's snapshot, taken before a
      // concurrent tab's mark committed, and would find no row where the insert just met one.
      const stored: ReadMarkRow = await forUpdate(trx, trx('inbox_reads').where(key).first());
      return { ...stored, last_read_at: num(stored.last_read_at)!, updated_at: num(stored.updated_at)! };
    },
  };
}

export type InboxStore = ReturnType<typeof createInboxStore>;
