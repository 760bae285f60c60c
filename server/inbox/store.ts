import type { Knex } from 'knex';
import { forUpdate, incrementReturning, isUniqueViolation } from '../db/knex';
import { precompiled, precompiledInsert } from '../db/precompiled';

/** A row of a site's inbox feed: a public event it mirrors (`event_id`), or a private change (`body`). */
export interface ActivityRow {
  site_id: string;
  position: number;
  kind: string;
  /** Null for a change of the whole site (a tag renamed or deleted; 029_site_feed_rows.ts). */
  conversation_id: string | null;
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
 * Another owner's read sent in the unread counts' statement (`unreadCountsWith`): its query for the
 * page's site and conversations, the columns it adds beside conversation_id, and its rows' order.
 * `build` runs once per page size with stand-ins for the values (db/precompiled.ts): it must put
 * each where its value goes, as given. `name` tells parts apart in the cache of compiled statements.
 */
export interface BesidePart {
  name: string;
  build: (siteId: string, conversationIds: readonly string[]) => Knex.QueryBuilder;
  columns: readonly string[];
  orderBy: readonly string[];
}

/** A never-read conversation's lower end for its count: message times are never negative, so all of them are after it. */
const NEVER_READ = -1;

type CountRow = { conversation_id: string | null; n: unknown } & Record<string, unknown>;

/** A feed row is written whole. */
const insertActivity = precompiledInsert<ActivityRow>('inbox_activity', [
  'site_id',
  'position',
  'kind',
  'conversation_id',
  'event_id',
  'account_id',
  'body',
  'created_at',
]);

/**
 * The inbox's tables (011_inbox.ts): read marks, the site's feed and its position counter. The
 * assignee is a column of `conversations`, written by the conversation store.
 */
export function createInboxStore(db: Knex) {
  /**
   * The site's next feed position, taken under the lock of the site's counter row, held until the
   * caller's transaction ends: positions of a site commit in their order, so a reader that has seen
   * position n has seen (or will never see) every position below it, and a rolled-back change
   * gives its number back. (A writer holding position n blocks the next writer's bump until it
   * commits or rolls back, so a higher position can never commit first: no reader skips a row that
   * commits later with a lower number. test/inbox/feed-order.test.ts holds two writers that way.)
   * The lock serialises a site's feed writers from the bump to their commit: the writers append
   * last in their transactions (activity.ts), so it is held for this, the row's insert and the
   * commit. The row is made by the site's first change; two first changes at once meet on its
   * primary key and the loser bumps the winner's row.
   */
  async function nextPosition(trx: Knex.Transaction, siteId: string): Promise<number> {
    const bumped = await incrementReturning(trx, 'inbox_positions', 'site_id', siteId, 'position');
    if (bumped !== undefined) return bumped;
    try {
      await trx('inbox_positions').insert({ site_id: siteId, position: 1 });
      return 1;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    return (await incrementReturning(trx, 'inbox_positions', 'site_id', siteId, 'position'))!;
  }

  /**
   * The counts' statement of a page of `n` conversations (with `beside` as its last part), built
   * with the query builder once per shape and then sent as raw SQL (db/precompiled.ts): compiling
   * its n nested parts on every page was a good share of the page's time in Knex. Its values: the
   * member, each conversation's id and mark (NEVER_READ when none), then the site (with `beside`).
   */
  const countStatements = new Map<string, (values: readonly unknown[]) => Promise<CountRow[]>>();
  function countStatement(n: number, beside: BesidePart | undefined) {
    const key = `${n} ${beside?.name ?? ''}`;
    let statement = countStatements.get(key);
    if (!statement) {
      statement = precompiled<CountRow>(db, 1 + 2 * n + (beside ? 1 : 0), (v) => {
        const padding = (beside?.columns ?? []).map((c) => db.raw('null as ??', [c]));
        const parts = Array.from({ length: n }, (_, i) => {
          const unread = db('messages')
            .where('conversation_id', v[1 + 2 * i])
            .andWhere((w) => w.whereNull('author_id').orWhere('author_id', '<>', v[0]))
            .andWhere('created_at', '>', v[2 + 2 * i])
            .limit(UNREAD_COUNT_CAP)
            .select('conversation_id');
          // One row per part; its id is null when nothing is unread (read as 0). No GROUP BY: Knex
          // writes a compound query's GROUP BY after the UNION, where it would group the whole.
          return db.from(unread.as('u')).select(db.raw('max(u.conversation_id) as conversation_id'), db.raw('count(*) as n'), ...padding);
        });
        if (beside) {
          const ids = Array.from({ length: n }, (_, i) => v[1 + 2 * i] as unknown as string);
          const part = beside.build(v[1 + 2 * n] as unknown as string, ids).as('b');
          parts.push(db.from(part).select('b.conversation_id', db.raw('null as n'), ...beside.columns.map((c) => `b.${c}`)));
        }
        const [first, ...rest] = parts;
        // Not wrapped in parentheses: SQLite refuses a parenthesised SELECT in a compound one.
        const q = rest.length ? first.unionAll(rest) : first;
        return beside ? q.orderBy(beside.orderBy.map((column) => ({ column }))) : q;
      });
      countStatements.set(key, statement);
    }
    return statement;
  }

  /**
   * `unreadCounts` with another owner's read of the same rows (`beside`: the page's tags) sent in
   * the same statement, as a last part of the UNION ALL: one round trip for both. Each part has the
   * columns conversation_id, n, then the beside part's own (null in a count's part, and n null in
   * the beside part's rows); the whole is ordered by the beside part's order, counts first.
   */
  async function unreadCountsWith<Beside extends object = never>(
    accountId: string,
    conversationIds: string[],
    marks: Map<string, number>,
    beside?: { part: BesidePart; siteId: string },
  ): Promise<{ counts: Map<string, number>; beside: Beside[] }> {
    if (!conversationIds.length) return { counts: new Map(), beside: [] };
    const values: unknown[] = [accountId];
    for (const id of conversationIds) values.push(id, marks.get(id) ?? NEVER_READ);
    if (beside) values.push(beside.siteId);
    const rows = await countStatement(conversationIds.length, beside?.part)(values);
    const counts = new Map<string, number>();
    const others: Beside[] = [];
    for (const r of rows) {
      if (r.n === null) others.push(r as unknown as Beside);
      else if (r.conversation_id !== null) counts.set(r.conversation_id, Number(r.n));
    }
    return { counts, beside: others };
  }

  return {
    db,

    /** Appends to the site's feed in the change's transaction; answers the position. */
    async append(trx: Knex.Transaction, row: Omit<ActivityRow, 'position'>): Promise<number> {
      const position = await nextPosition(trx, row.site_id);
      await insertActivity(trx, { ...row, position });
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
      return (await unreadCountsWith(accountId, conversationIds, marks)).counts;
    },

    unreadCountsWith,

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
