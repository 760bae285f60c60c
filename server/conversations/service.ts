import type { Knex } from 'knex';
import { notFound } from '../platform/errors';
import { CursorCodec, toPage } from '../platform/cursor';
import { runInTransaction } from '../db/transaction';
import type { Outbox } from '../webhooks/outbox';
import type { operations } from '../../sdk/src/generated/api';
import { ConversationStore, conversationToDto } from './store';
import { conversationFilter, type FilterQuery } from './filter';

export type ListConversationsQuery = NonNullable<operations['listConversations']['parameters']['query']>;

export function createConversationService(deps: { db: Knex; store: ConversationStore; cursors: CursorCodec; now: () => number; outbox: Outbox }) {
  const { db, store, cursors, now, outbox } = deps;

  /**
   * A page of the list under the filter the query makes (`me`: the signed-in member, for the
   * inbox's filters). The cursor is bound to the site and the filter (not the limit, which may
   * change between pages).
   */
  function listing(siteId: string, query: FilterQuery & { limit?: number; cursor?: string }, me?: string) {
    const filter = conversationFilter(query, me);
    const scope = { list: 'conversations', siteId, ...filter };
    const after = query.cursor ? cursors.decode(query.cursor, scope) : undefined;
    return { filter, scope, after, limit: query.limit ?? 25 };
  }

  return {
    /** The public list (`/api/v1`). */
    async list(siteId: string, query: ListConversationsQuery) {
      const { filter, scope, after, limit } = listing(siteId, query);
      return toPage(await store.list(siteId, filter, after, limit + 1), limit, (r) => r.map(conversationToDto), cursors, scope);
    },

    /** The inbox's list: the same rows, under the inbox's filters as well, each with its assignee and `me`'s read mark. */
    async rowsForMember(siteId: string, query: FilterQuery & { limit?: number; cursor?: string }, me: string) {
      const { filter, scope, after, limit } = listing(siteId, query, me);
      return toPage(await store.listWithMarks(siteId, filter, after, limit + 1, me), limit, (r) => r, cursors, scope);
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
