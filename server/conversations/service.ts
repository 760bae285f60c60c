import type { Knex } from 'knex';
import { invalid, notFound } from '../platform/errors';
import { CursorCodec, toPage } from '../platform/cursor';
import { runInTransaction } from '../db/transaction';
import type { Outbox } from '../webhooks/outbox';
import type { operations } from '../../sdk/src/generated/api';
import { ConversationFilters, ConversationStore, conversationToDto } from './store';

export type ListConversationsQuery = NonNullable<operations['listConversations']['parameters']['query']>;

function timeFilter(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid(`${name} is not an ISO 8601 date-time.`, [{ path: `/query/${name}`, message: 'must be an ISO 8601 date-time' }]);
  return ms;
}

export function createConversationService(deps: { db: Knex; store: ConversationStore; cursors: CursorCodec; now: () => number; outbox: Outbox }) {
  const { db, store, cursors, now, outbox } = deps;

  /** A list request's filters, position and size; the cursor is bound to the site and the filters (not the limit, which may change between pages). */
  function listing(siteId: string, query: ListConversationsQuery, inbox: Pick<ConversationFilters, 'assigneeId' | 'unreadFor'>) {
    const filters: ConversationFilters = {
      ...inbox,
      state: query.state,
      createdAfter: timeFilter(query.createdAfter, 'createdAfter'),
      createdBefore: timeFilter(query.createdBefore, 'createdBefore'),
      updatedAfter: timeFilter(query.updatedAfter, 'updatedAfter'),
      updatedBefore: timeFilter(query.updatedBefore, 'updatedBefore'),
    };
    const scope = { list: 'conversations', siteId, ...filters };
    const after = query.cursor ? cursors.decode(query.cursor, scope) : undefined;
    return { filters, after, limit: query.limit ?? 25, scope };
  }

  return {
    /** The public list; the inbox adds its filters (`inbox`), which the cursor is bound to as well. */
    async list(siteId: string, query: ListConversationsQuery, inbox: Pick<ConversationFilters, 'assigneeId' | 'unreadFor'> = {}) {
      const { filters, after, limit, scope } = listing(siteId, query, inbox);
      const rows = await store.list(siteId, filters, after, limit + 1);
      return toPage(rows, limit, (r) => r.map(conversationToDto), cursors, scope);
    },

    /** The inbox's list: the same page, each row with the assignee and `accountId`'s read mark (InboxColumns). */
    async listWithReads(siteId: string, query: ListConversationsQuery, inbox: Pick<ConversationFilters, 'assigneeId' | 'unreadFor'>, accountId: string) {
      const { filters, after, limit, scope } = listing(siteId, query, inbox);
      const rows = await store.listWithReads(siteId, filters, after, limit + 1, accountId);
      return toPage(rows, limit, (r) => r, cursors, scope);
    },

    async get(siteId: string, id: string) {
      const row = await store.find(siteId, id);
      if (!row) throw notFound('Conversation');
      return conversationToDto(row);
    },

    /**
     * open -> closed once, with one `conversation.closed`; closing again answers the same card.
     * `withinTransaction` runs in the closing transaction only when this call closed it (the
     * inbox's audit entry).
     */
    async close(siteId: string, id: string, withinTransaction?: (trx: Knex.Transaction, closed: ReturnType<typeof conversationToDto>) => Promise<void>) {
      return runInTransaction(db, async (trx) => {
        const row = await store.findForUpdate(trx, siteId, id);
        if (!row) throw notFound('Conversation');
        if (row.state === 'closed') return conversationToDto(row);
        const at = Math.max(now(), row.updated_at);
        if (!(await store.close(trx, id, at))) {
          // Closed by a concurrent request between our read and our write (SQLite path): answer its card.
          return conversationToDto((await store.find(siteId, id, trx))!);
        }
        const closed = conversationToDto({ ...row, state: 'closed', open_marker: null, closed_at: at, updated_at: at });
        await outbox.emit(trx, { siteId, name: 'conversation.closed', conversation: closed, message: null }, at);
        if (withinTransaction) await withinTransaction(trx, closed);
        return closed;
      });
    },
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
