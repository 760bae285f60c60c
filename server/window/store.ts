import type { Knex } from 'knex';
import { mapConversationRow, type ConversationRow } from '../conversations/store';
import { MESSAGE_COLUMNS, mapMessageRow, MessageRow } from '../messages/store';

export interface ClientMessageRow {
  site_id: string;
  visitor_id: string;
  client_message_id: string;
  message_id: string;
  request_hash: string;
  created_at: number;
}

/** The chat window's reads and writes beyond what the conversation and message stores have. */
export function createWindowStore(db: Knex) {
  return {
    findClientMessage: (trx: Knex, siteId: string, visitorId: string, clientMessageId: string) =>
      trx<ClientMessageRow>('window_client_messages').where({ site_id: siteId, visitor_id: visitorId, client_message_id: clientMessageId }).first(),

    /** Fails with a unique violation when the visitor already used this client id (a concurrent resend). */
    insertClientMessage: (trx: Knex.Transaction, row: ClientMessageRow) => trx('window_client_messages').insert(row),

    async findMessage(id: string): Promise<MessageRow | undefined> {
      const r: MessageRow | undefined = await db('messages').where({ id }).first(MESSAGE_COLUMNS);
      return r && mapMessageRow(r);
    },

    /** The visitor's newest conversation (open, or the last one closed). */
    async latestConversation(siteId: string, visitorId: string): Promise<ConversationRow | undefined> {
      const r = await db<ConversationRow>('conversations')
        .where({ site_id: siteId, visitor_id: visitorId })
        .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
        .first();
      return r && mapConversationRow(r);
    },

    /** The visitor's conversation that started after `after` (or its first one). */
    async nextConversation(siteId: string, visitorId: string, after: { created_at: number; id: string } | null): Promise<ConversationRow | undefined> {
      const q = db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId });
      if (after) {
        q.andWhere('created_at', '>=', after.created_at).andWhere((w) => w.where('created_at', '>', after.created_at).orWhere('id', '>', after.id));
      }
      const r = await q.orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]).first();
      return r && mapConversationRow(r);
    },

    async conversationOfVisitor(siteId: string, visitorId: string, id: string): Promise<ConversationRow | undefined> {
      const r = await db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId, id }).first();
      return r && mapConversationRow(r);
    },

    /**
     * Messages of a conversation from `createdAt` on (inclusive: messages written in the same
     * millisecond as the last one delivered may sort before it by id), oldest first.
     */
    async messagesFrom(conversationId: string, createdAt: number, limit: number): Promise<MessageRow[]> {
      const rows: MessageRow[] = await db('messages')
        .where('conversation_id', conversationId)
        .andWhere('created_at', '>=', createdAt)
        .orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }])
        .limit(limit)
        .select(MESSAGE_COLUMNS);
      return rows.map(mapMessageRow);
    },

    /** Newest message time of a conversation and every message id written at that millisecond. */
    async tailOf(conversationId: string): Promise<{ createdAt: number; ids: string[] } | null> {
      const last = await db<MessageRow>('messages').where('conversation_id', conversationId).max({ t: 'created_at' }).first();
      const t = last?.t === null || last?.t === undefined ? null : Number(last.t);
      if (t === null) return null;
      const ids = await db<MessageRow>('messages').where({ conversation_id: conversationId, created_at: t }).orderBy('id').pluck('id');
      return { createdAt: t, ids };
    },
  };
}

export type WindowStore = ReturnType<typeof createWindowStore>;
