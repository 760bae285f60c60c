import type { Knex } from 'knex';

export interface ClientMessageRow {
  site_id: string;
  visitor_id: string;
  client_message_id: string;
  message_id: string;
  request_hash: string;
  created_at: number;
}

/**
 * The chat window's own table: the client message ids of visitors' sends, always in the caller's
 * transaction (so it takes no database handle of its own). Conversations, messages
 * and events are read through their own stores.
 */
export function createWindowStore() {
  return {
    findClientMessage: (trx: Knex, siteId: string, visitorId: string, clientMessageId: string) =>
      trx<ClientMessageRow>('window_client_messages').where({ site_id: siteId, visitor_id: visitorId, client_message_id: clientMessageId }).first(),

    /** Deleting a visitor's data: the client ids of these messages of the visitor (they refer to the messages). */
    removeForMessages: (trx: Knex.Transaction, siteId: string, visitorId: string, messageIds: string[]) =>
      messageIds.length
        ? trx('window_client_messages').where({ site_id: siteId, visitor_id: visitorId }).whereIn('message_id', messageIds).delete()
        : Promise.resolve(0),

    /** Deleting a visitor's data: whatever client ids of the visitor are left. */
    removeForVisitor: (trx: Knex.Transaction, siteId: string, visitorId: string) =>
      trx('window_client_messages').where({ site_id: siteId, visitor_id: visitorId }).delete(),

    /** Fails with a unique violation when the visitor already used this client id (a concurrent resend). */
    insertClientMessage: (trx: Knex.Transaction, row: ClientMessageRow) => trx('window_client_messages').insert(row),
  };
}

export type WindowStore = ReturnType<typeof createWindowStore>;
