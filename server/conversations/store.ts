import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { withIndex } from '../db/index-hint';
import type { StoreContract } from '../db/store-contract';
import type { Position } from '../platform/cursor';
import { toIso, toIsoRequired } from '../platform/time';
import type { components } from '../../sdk/src/generated/api';
import { joinReadMarks, whereUnread, type ReadMarkColumns } from '../inbox/store';
import { createSearchStore } from '../search/store';
import { whereTagged } from '../tags/filter';
import { listIndexFor, type ConversationFilter } from './filter';

export type Conversation = components['schemas']['Conversation'];
export type ConversationState = components['schemas']['ConversationState'];

export interface ConversationRow {
  id: string;
  site_id: string;
  visitor_id: string;
  state: ConversationState;
  open_marker: number | null;
  created_at: number;
  updated_at: number;
  last_message_at: number | null;
  closed_at: number | null;
  /** The member it is assigned to (011_inbox.ts); absent on a row this process made (none yet). */
  assignee_id?: string | null;
}

/** What an inbox row shows of the last message and of the wait (027_rows.ts; LastMessage), read with the member's marks. */
export interface RowColumns {
  last_preview: string | null;
  last_direction: 'incoming' | 'outgoing' | null;
  last_author_id: string | null;
  last_attachments: number;
  waiting_since: number | null;
  answered_at: number | null;
  answered_by: string | null;
}

/** What an inbox row shows of a conversation's last message (027_rows.ts), written in the message's transaction. */
export interface LastMessage {
  preview: string;
  direction: 'incoming' | 'outgoing';
  /** The member who wrote it in the inbox; null for the visitor, an integration or the operator CLI. */
  authorId: string | null;
  attachments: number;
}

/**
 * The columns a message at `at` sets: its summary, and the wait. A visitor's message starts the
 * wait unless one is running (the oldest unanswered message counts); any answer ends it.
 */
function lastMessageColumns(db: Knex, at: number, last: LastMessage) {
  const summary = { last_preview: last.preview, last_direction: last.direction, last_author_id: last.authorId, last_attachments: last.attachments };
  return last.direction === 'incoming'
    ? { ...summary, waiting_since: db.raw('coalesce(??, ?)', ['waiting_since', at]) }
    : { ...summary, waiting_since: null, answered_at: at, answered_by: last.authorId };
}

export function conversationToDto(row: ConversationRow): Conversation {
  return {
    id: row.id,
    state: row.state,
    visitorId: row.visitor_id,
    createdAt: toIsoRequired(row.created_at),
    updatedAt: toIsoRequired(row.updated_at),
    lastMessageAt: toIso(row.last_message_at),
    closedAt: toIso(row.closed_at),
  };
}

/** The one row mapping of `conversations`: driver differences normalised (mysql2 may hand BIGINT back as string). */
export function mapConversationRow(row: ConversationRow): ConversationRow {
  return withNumericColumns(row, ['created_at', 'updated_at', 'last_message_at', 'closed_at']);
}

const normalise = (row: ConversationRow | undefined) => row && mapConversationRow(row);
/** Every column of the card, named: a column added later is not read until a reader needs it. */
const COLUMNS = ['id', 'site_id', 'visitor_id', 'state', 'open_marker', 'created_at', 'updated_at', 'last_message_at', 'closed_at', 'assignee_id'] as const;
const QUALIFIED_COLUMNS = COLUMNS.map((c) => `conversations.${c}`);
const ROW_COLUMNS = ['last_preview', 'last_direction', 'last_author_id', 'last_attachments', 'waiting_since', 'answered_at', 'answered_by'].map(
  (c) => `conversations.${c}`,
);
/** An inbox row: the card, the member's read mark (the inbox store's join) and what the row shows (ROW_COLUMNS). */
const INBOX_ROW_COLUMNS = [...QUALIFIED_COLUMNS, ...ROW_COLUMNS];
const mapWithMarks = (row: ConversationRow & ReadMarkColumns & RowColumns) =>
  withNumericColumns(row, ['created_at', 'updated_at', 'last_message_at', 'closed_at', 'read_at', 'last_attachments', 'waiting_since', 'answered_at']);
export function createConversationStore(db: Knex) {
  /**
   * Newest first by (created_at, id): a keyset range scan, in order, on the index `listIndexFor`
   * names (db/index-hint.ts), so that no engine picks another. created* bound the scan itself;
   * updated* are tested on the entries it walks (005_read_path.ts), so a deep page costs what the
   * first one does. What other tables decide is each owner's part of the one statement: the
   * member's read marks and the unread filter (the inbox store's, one primary-key look-up per
   * entry walked), the tag (one look-up in `conversation_tags`), the search (the search read
   * model's matches). With `marksOf`, each row carries that member's read mark.
   */
  async function listRows(siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number, marksOf?: string) {
    if (marksOf !== undefined && filter.unreadFor !== undefined && marksOf !== filter.unreadFor) {
      throw new Error('conversations.list: one member per list (marksOf and unreadFor differ)');
    }
    const index = listIndexFor(filter);
    const q = db.from<ConversationRow>(index ? withIndex(db, 'conversations', index) : 'conversations').where('conversations.site_id', siteId);
    const member = marksOf ?? filter.unreadFor;
    if (member !== undefined) joinReadMarks(db, q, member);
    if (filter.unreadFor !== undefined) whereUnread(db, q);
    if (filter.assigneeId === null) q.whereNull('conversations.assignee_id');
    else if (filter.assigneeId !== undefined) q.andWhere('conversations.assignee_id', filter.assigneeId);
    if (filter.state) q.andWhere('conversations.state', filter.state);
    if (filter.tagId !== undefined) whereTagged(db, q, siteId, filter.tagId);
    if (filter.words) q.whereIn('conversations.id', createSearchStore(db).matchingConversations(siteId, filter.words));
    if (filter.createdAfter !== undefined) q.andWhere('conversations.created_at', '>=', filter.createdAfter);
    if (filter.updatedAfter !== undefined) q.andWhere('conversations.updated_at', '>=', filter.updatedAfter);
    if (filter.updatedBefore !== undefined) q.andWhere('conversations.updated_at', '<', filter.updatedBefore);
    // The scan's upper end on created_at, given as ONE bound: SQLite ranges an index column on a
    // single upper bound and merely filters by the others, so `createdBefore` beside the cursor
    // would walk every row above the cursor. A conversation's updated_at never falls below its
    // created_at (it starts equal; touch and close take max(now, updated_at)), so nothing created
    // at or after updatedBefore can match either: that bounds the scan too.
    const before = Math.min(filter.createdBefore ?? Infinity, filter.updatedBefore ?? Infinity);
    if (after && after.createdAt < before) {
      // Below the cursor, which lies below `before`. A range on created_at plus a tie-break: an index range on both engines.
      q.andWhere('conversations.created_at', '<=', after.createdAt).andWhere((w) =>
        w.where('conversations.created_at', '<', after.createdAt).orWhere('conversations.id', '<', after.id),
      );
    } else if (before !== Infinity) {
      q.andWhere('conversations.created_at', '<', before); // a cursor at or above `before` excludes nothing more
    }
    const rows: (ConversationRow & ReadMarkColumns & RowColumns)[] = await q
      .orderBy([
        { column: 'conversations.created_at', order: 'desc' },
        { column: 'conversations.id', order: 'desc' },
      ])
      .limit(limit)
      .select(member === undefined ? QUALIFIED_COLUMNS : INBOX_ROW_COLUMNS);
    return rows.map(member === undefined ? mapConversationRow : mapWithMarks);
  }

  return {
    async find(siteId: string, id: string, trx: Knex = db): Promise<ConversationRow | undefined> {
      return normalise(await trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first(COLUMNS));
    },

    async findForUpdate(trx: Knex.Transaction, siteId: string, id: string) {
      return normalise(await forUpdate(trx, trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first(COLUMNS)));
    },

    /** One conversation of the site with `accountId`'s read mark (the inbox store's join), in one read. */
    async findWithMarks(siteId: string, id: string, accountId: string): Promise<(ConversationRow & ReadMarkColumns & RowColumns) | undefined> {
      const q = db('conversations').where({ 'conversations.site_id': siteId, 'conversations.id': id });
      const row = await joinReadMarks(db, q, accountId).first(INBOX_ROW_COLUMNS);
      return row && mapWithMarks(row);
    },

    async findById(id: string, trx: Knex = db) {
      return normalise(await trx<ConversationRow>('conversations').where({ id }).first(COLUMNS));
    },

    /**
     * The visitor's open conversation, locked. Found with a plain read first and then locked by
     * primary key: a locking read of a row that does not exist yet would take a gap lock on
     * MySQL, and two first messages of different visitors would deadlock on their inserts. The
     * row may have been closed between the two reads, hence the state check.
     */
    async findOpenForVisitor(trx: Knex.Transaction, siteId: string, visitorId: string) {
      const seen = await trx<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId, open_marker: 1 }).first('id');
      if (!seen) return undefined;
      const locked = normalise(await forUpdate(trx, trx<ConversationRow>('conversations').where({ id: seen.id }).first(COLUMNS)));
      return locked && locked.state === 'open' ? locked : undefined;
    },

    /** The visitor's conversation with this id (another visitor's is not found). */
    async findOfVisitor(siteId: string, visitorId: string, id: string): Promise<ConversationRow | undefined> {
      return normalise(await db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId, id }).first(COLUMNS));
    },

    /** The visitor's newest conversation (open, or the last one closed). */
    async latestOfVisitor(siteId: string, visitorId: string): Promise<ConversationRow | undefined> {
      return normalise(
        await db<ConversationRow>('conversations')
          .where({ site_id: siteId, visitor_id: visitorId })
          .orderBy([
            { column: 'created_at', order: 'desc' },
            { column: 'id', order: 'desc' },
          ])
          .first(COLUMNS),
      );
    },

    /** The visitor's conversation that started after `after` (or its first one), in (created_at, id) order. */
    async nextOfVisitor(siteId: string, visitorId: string, after: { created_at: number; id: string } | null): Promise<ConversationRow | undefined> {
      const q = db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId });
      if (after) {
        q.andWhere('created_at', '>=', after.created_at).andWhere((w) => w.where('created_at', '>', after.created_at).orWhere('id', '>', after.id));
      }
      return normalise(
        await q
          .orderBy([
            { column: 'created_at', order: 'asc' },
            { column: 'id', order: 'asc' },
          ])
          .first(COLUMNS),
      );
    },

    /** The visitor's conversations, newest first, at most `limit` (the inbox's side panel; deleting the visitor's data). */
    async ofVisitor(siteId: string, visitorId: string, limit: number, trx: Knex = db): Promise<ConversationRow[]> {
      const rows: ConversationRow[] = await trx<ConversationRow>('conversations')
        .where({ site_id: siteId, visitor_id: visitorId })
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(limit)
        .select(COLUMNS);
      return rows.map(mapConversationRow);
    },

    /** Deleting a visitor's data: these conversations of the site, once nothing refers to them any more. */
    removeMany: async (trx: Knex.Transaction, siteId: string, ids: string[]): Promise<number> =>
      ids.length ? Number(await trx('conversations').where('site_id', siteId).whereIn('id', ids).delete()) : 0,

    insert: (trx: Knex.Transaction, row: ConversationRow) => trx('conversations').insert(row),

    /** A message arrived at `at`: the times move, and the row's summary of the last message and of the wait (027_rows.ts) follows it. */
    touch: (trx: Knex.Transaction, id: string, at: number, last: LastMessage) =>
      trx('conversations')
        .where({ id })
        .update({ updated_at: at, last_message_at: at, ...lastMessageColumns(trx, at, last) }),

    /** Closes only an open conversation; answers whether this call did it (so one close emits one event). */
    async close(trx: Knex.Transaction, id: string, at: number): Promise<boolean> {
      const n = await trx('conversations').where({ id, state: 'open' }).update({ state: 'closed', open_marker: null, closed_at: at, updated_at: at });
      return Number(n) === 1;
    },

    /** Assigns the conversation to a member, or to nobody (the inbox service's rules decide who may). */
    setAssignee: (trx: Knex.Transaction, id: string, assigneeId: string | null) => trx('conversations').where({ id }).update({ assignee_id: assigneeId }),

    /** A page of the list (see listRows). */
    list: (siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number): Promise<ConversationRow[]> =>
      listRows(siteId, filter, after, limit),
    /** The list with `accountId`'s read mark beside each row. */
    listWithMarks: (siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number, accountId: string) =>
      listRows(siteId, filter, after, limit, accountId) as Promise<(ConversationRow & ReadMarkColumns & RowColumns)[]>,
  };
}

export type ConversationStore = StoreContract<ReturnType<typeof createConversationStore>>;
