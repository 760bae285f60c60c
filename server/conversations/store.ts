import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { withIndex } from '../db/index-hint';
import type { StoreContract } from '../db/store-contract';
import type { Position } from '../platform/cursor';
import { toIso, toIsoRequired } from '../platform/time';
import type { components } from '../../sdk/src/generated/api';
import { joinReadMarks, whereUnread, type ReadMarkColumns } from '../inbox/store';
import { joinVisitorNames, replyEmailColumns, replyEmailSubscriberOf, type ReplyEmailColumns, type VisitorNameColumns } from '../visitors/store';
import type { ReplyEmailSubscriber } from '../visitors/reply-email-rules';
import { searchStep } from '../search/plan';
import { createSearchStore } from '../search/store';
import { whereTagged } from '../tags/filter';
import { listIndexFor, type ConversationFilter, type ListIndex } from './filter';
import { eventAddressColumns, eventAddressOf, type EventAddress } from '../webhooks/store';

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
/** An inbox row: the card, the member's read mark (the inbox store's join), the visitor's name (the visitors store's join) and what the row shows (ROW_COLUMNS). */
export type InboxRow = ConversationRow & ReadMarkColumns & RowColumns & VisitorNameColumns;
const INBOX_ROW_COLUMNS = [...QUALIFIED_COLUMNS, ...ROW_COLUMNS];
const INBOX_NUMERIC = ['created_at', 'updated_at', 'last_message_at', 'closed_at', 'read_at', 'last_attachments', 'waiting_since', 'answered_at'] as const;
/** In place: the driver's row objects are fresh and ours alone, and a copy per row is garbage the inbox page's profile showed. */
const mapWithMarks = (row: InboxRow): InboxRow => {
  const r = row as unknown as Record<string, unknown>;
  for (const c of INBOX_NUMERIC) r[c] = r[c] === null || r[c] === undefined ? null : Number(r[c]);
  return row;
};
/** A conversation locked for a reply, with what the reply's transaction needs of its site and visitor (findForReply). */
export interface ReplyLock {
  conversation: ConversationRow;
  eventAddress: EventAddress | null;
  visitor: ReplyEmailSubscriber;
}

export function createConversationStore(db: Knex) {
  const search = createSearchStore(db);
  /** The joins of an inbox row beside the card: the member's read mark and the visitor's name. */
  const joinInboxRow = (q: Knex.QueryBuilder, accountId: string) => joinVisitorNames(joinReadMarks(db, q, accountId));

  /**
   * The part of a list's statement that decides which entries of its index it walks: the site, the
   * index's equality columns and the range on (created_at, id) between `lowest` (inclusive) and the
   * cursor `after` (exclusive). Both bounds are a keyset range on both engines.
   */
  function walkRange(
    q: Knex.QueryBuilder,
    siteId: string,
    index: ListIndex | null,
    filter: ConversationFilter,
    after: Position | undefined,
    lowest?: Position,
  ) {
    q.where('conversations.site_id', siteId);
    if (index === 'conversations_site_assignee_created') {
      if (filter.assigneeId === null) q.whereNull('conversations.assignee_id');
      else q.andWhere('conversations.assignee_id', filter.assigneeId!);
    } else if (index === 'conversations_site_state_created_updated') {
      q.andWhere('conversations.state', filter.state!);
    }
    if (filter.createdAfter !== undefined) q.andWhere('conversations.created_at', '>=', filter.createdAfter);
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
    if (lowest) {
      q.andWhere('conversations.created_at', '>=', lowest.createdAt).andWhere((w) =>
        w.where('conversations.created_at', '>', lowest.createdAt).orWhere('conversations.id', '>=', lowest.id),
      );
    }
    return q.orderBy([
      { column: 'conversations.created_at', order: 'desc' },
      { column: 'conversations.id', order: 'desc' },
    ]);
  }

  /**
   * Newest first by (created_at, id): a keyset range scan, in order, on the index `listIndexFor`
   * names (db/index-hint.ts), so that no engine picks another. created* bound the scan itself;
   * updated* are tested on the entries it walks (005_read_path.ts), so a deep page costs what the
   * first one does. What other tables decide is each owner's part of the one statement: the
   * member's read marks and the unread filter (the inbox store's, one primary-key look-up per
   * entry walked), the tag (one look-up in `conversation_tags`), the search (`words`: the search
   * read model's matches from its full-text index, or with `walk`, each conversation walked tested
   * on its own entries down to `walk.lowest`). With `marksOf`, each row carries that member's read mark and its visitor's name.
   */
  async function listRows(
    siteId: string,
    filter: ConversationFilter,
    after: Position | undefined,
    limit: number,
    marksOf?: string,
    walk?: { lowest: Position | undefined },
  ) {
    if (marksOf !== undefined && filter.unreadFor !== undefined && marksOf !== filter.unreadFor) {
      throw new Error('conversations.list: one member per list (marksOf and unreadFor differ)');
    }
    // The full-text index's matches are a set the engine joins its own way; a walk keeps the list's index.
    const index = filter.words && !walk ? null : listIndexFor(filter);
    const q = db.from<ConversationRow>(index ? withIndex(db, 'conversations', index) : 'conversations');
    walkRange(q, siteId, index, filter, after, walk?.lowest);
    const member = marksOf ?? filter.unreadFor;
    if (member !== undefined) joinInboxRow(q, member);
    if (filter.unreadFor !== undefined) whereUnread(db, q);
    // The filters the index's range did not take (walkRange), tested on each entry walked.
    if (index !== 'conversations_site_assignee_created') {
      if (filter.assigneeId === null) q.whereNull('conversations.assignee_id');
      else if (filter.assigneeId !== undefined) q.andWhere('conversations.assignee_id', filter.assigneeId);
    }
    if (filter.state && index !== 'conversations_site_state_created_updated') q.andWhere('conversations.state', filter.state);
    if (filter.tagId !== undefined) whereTagged(db, q, siteId, filter.tagId);
    if (filter.words && walk) q.whereExists(search.conversationHasEntry(filter.words));
    else if (filter.words) q.whereIn('conversations.id', search.matchingConversations(siteId, filter.words));
    if (filter.updatedAfter !== undefined) q.andWhere('conversations.updated_at', '>=', filter.updatedAfter);
    if (filter.updatedBefore !== undefined) q.andWhere('conversations.updated_at', '<', filter.updatedBefore);
    const rows: InboxRow[] = await q.limit(limit).select(member === undefined ? QUALIFIED_COLUMNS : INBOX_ROW_COLUMNS);
    return rows.map(member === undefined ? mapConversationRow : mapWithMarks);
  }

  /**
   * The position of the `size`-th entry of the list's index range below `after`: the lower end of
   * a window of the search's walk. Read from the index alone. Undefined when fewer entries remain.
   */
  async function windowEnd(siteId: string, filter: ConversationFilter, after: Position | undefined, size: number): Promise<Position | undefined> {
    const index = listIndexFor(filter);
    const q = walkRange(db.from(withIndex(db, 'conversations', index)), siteId, index, filter, after);
    const row: { created_at: number | string; id: string } | undefined = await q.offset(size - 1).first('conversations.created_at', 'conversations.id');
    return row && { createdAt: Number(row.created_at), id: row.id };
  }

  /**
   * A page of a search: the steps `searchStep` chooses (server/search/plan.ts), each a window of
   * the walk (its lower end, then its matches) or the rest from the full-text index below the last
   * window. Rows come in the list's order and each window starts where the last one ended, so the
   * page is what one statement over the whole range would give.
   */
  async function searchRows(siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number, marksOf?: string) {
    const rows: Awaited<ReturnType<typeof listRows>> = [];
    const progress = { walked: 0, windows: 0, found: 0, wanted: limit };
    let position = after;
    for (;;) {
      const step = searchStep(progress);
      if (step.kind === 'index') {
        rows.push(...(await listRows(siteId, filter, position, limit - rows.length, marksOf)));
        return rows;
      }
      const lowest = await windowEnd(siteId, filter, position, step.window);
      rows.push(...(await listRows(siteId, filter, position, limit - rows.length, marksOf, { lowest })));
      if (rows.length >= limit || !lowest) return rows; // the page is full, or the walk reached the range's end
      Object.assign(progress, { walked: progress.walked + step.window, windows: progress.windows + 1, found: rows.length });
      position = lowest;
    }
  }

  const listPage = (siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number, marksOf?: string) =>
    filter.words ? searchRows(siteId, filter, after, limit, marksOf) : listRows(siteId, filter, after, limit, marksOf);

  return {
    async find(siteId: string, id: string, trx: Knex = db): Promise<ConversationRow | undefined> {
      return normalise(await trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first(COLUMNS));
    },

    async findForUpdate(trx: Knex.Transaction, siteId: string, id: string) {
      return normalise(await forUpdate(trx, trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first(COLUMNS)));
    },

    /**
     * findForUpdate for a reply, with what its transaction reads of others beside it in the same
     * statement: the site's event address (where its event goes) and its visitor's reply-email
     * subscription (whether the reply starts a notice), each the owning store's columns, which
     * lock nothing.
     */
    async findForReply(trx: Knex.Transaction, siteId: string, id: string): Promise<ReplyLock | undefined> {
      const query = trx<ConversationRow>('conversations')
        .where({ site_id: siteId, id })
        .first([...COLUMNS, ...eventAddressColumns(trx, siteId), ...replyEmailColumns(trx)]);
      const row = (await forUpdate(trx, query)) as
        (ConversationRow & { event_address_id: string | null; event_address_events: string | null } & ReplyEmailColumns) | undefined;
      if (!row) return undefined;
      const eventAddress = eventAddressOf(row);
      const visitor = replyEmailSubscriberOf(row);
      const {
        event_address_id: _id,
        event_address_events: _events,
        visitor_email: _email,
        visitor_reply_email_at: _at,
        visitor_reply_email_unsubscribed_at: _unsubscribed,
        ...conversation
      } = row;
      return { conversation: normalise(conversation)!, eventAddress, visitor };
    },

    /** One conversation of the site with `accountId`'s read mark and its visitor's name (the inbox and visitors stores' joins), in one read. */
    async findWithMarks(siteId: string, id: string, accountId: string): Promise<InboxRow | undefined> {
      const q = db('conversations').where({ 'conversations.site_id': siteId, 'conversations.id': id });
      const row = await joinInboxRow(q, accountId).first(INBOX_ROW_COLUMNS);
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
      listPage(siteId, filter, after, limit),
    /** The list with `accountId`'s read mark and the visitor's name beside each row. */
    listWithMarks: (siteId: string, filter: ConversationFilter, after: Position | undefined, limit: number, accountId: string) =>
      listPage(siteId, filter, after, limit, accountId) as Promise<InboxRow[]>,
  };
}

export type ConversationStore = StoreContract<ReturnType<typeof createConversationStore>>;
