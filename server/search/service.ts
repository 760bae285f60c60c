import type { Knex } from 'knex';
import type { ConversationRow, ConversationStore } from '../conversations/store';
import type { VisitorProfile, VisitorStore } from '../visitors/store';
import { cardText } from './card';
import type { SearchEntry, SearchStore } from './store';

/** Cards rewritten when a visitor's name or email changes: the visitor's newest conversations (a person rarely has more). */
export const CARDS_PER_VISITOR = 200;

/**
 * Keeps the search read model (server/search/store.ts) in step: each writer calls it in the
 * transaction of its change, so what is committed is found, and what is removed is not.
 */
export function createSearchIndex(deps: { store: SearchStore; visitors: Pick<VisitorStore, 'find'>; conversations: Pick<ConversationStore, 'ofVisitor'> }) {
  const { store } = deps;

  const card = (conversation: Pick<ConversationRow, 'id' | 'site_id' | 'visitor_id' | 'created_at'>, visitor: VisitorProfile | undefined): SearchEntry => ({
    site_id: conversation.site_id,
    conversation_id: conversation.id,
    kind: 'card',
    source_id: conversation.id,
    body: cardText(conversation, visitor),
    created_at: conversation.created_at,
  });

  return {
    /** A message written (server/messages/service.ts); a conversation's first message also writes its card. */
    async message(trx: Knex.Transaction, conversation: ConversationRow, message: { id: string; content: string; created_at: number }) {
      await store.put(trx, {
        site_id: conversation.site_id,
        conversation_id: conversation.id,
        kind: 'message',
        source_id: message.id,
        body: message.content,
        created_at: message.created_at,
      });
      if (conversation.last_message_at === null)
        await store.put(trx, card(conversation, await deps.visitors.find(conversation.site_id, conversation.visitor_id, trx)));
    },

    /** A note written or edited (server/notes/service.ts): members find a conversation by its notes too. */
    note: (trx: Knex.Transaction, note: { id: string; site_id: string; conversation_id: string; content: string; created_at: number }) =>
      store.put(trx, {
        site_id: note.site_id,
        conversation_id: note.conversation_id,
        kind: 'note',
        source_id: note.id,
        body: note.content,
        created_at: note.created_at,
      }),

    noteRemoved: (trx: Knex.Transaction, noteId: string) => store.remove(trx, 'note', noteId),

    /** A visitor's name or email changed (server/visitors/context.ts): the cards of its conversations follow. */
    async visitorChanged(trx: Knex.Transaction, siteId: string, visitorId: string) {
      const visitor = await deps.visitors.find(siteId, visitorId, trx);
      const conversations = await deps.conversations.ofVisitor(siteId, visitorId, CARDS_PER_VISITOR, trx);
      await store.putMany(
        trx,
        conversations.map((c) => card(c, visitor)),
      );
    },

    /** Deleting a visitor's data: the entries of these conversations, `limit` at a time (a part of server/visitors/deletion.ts). */
    removeForConversations: (trx: Knex.Transaction, siteId: string, ids: string[], limit: number) => store.removeForConversations(trx, siteId, ids, limit),
  };
}

export type SearchIndex = ReturnType<typeof createSearchIndex>;
