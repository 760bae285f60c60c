import type { Knex } from 'knex';
import { whereFulltextMatch, whereWordsInRow } from '../db/fulltext';
import type { StoreContract } from '../db/store-contract';

/** What an entry mirrors (026_search.ts): a message's text, a note's text, or a conversation's card. */
export type SearchKind = 'message' | 'note' | 'card';

export interface SearchEntry {
  site_id: string;
  conversation_id: string;
  kind: SearchKind;
  source_id: string;
  body: string;
  created_at: number;
}

/**
 * The search read model's table (`search_entries`, 026_search.ts, with its full-text index): the
 * only writer and reader of it. Entries are written in the transaction of the change they mirror
 * (server/search/service.ts) and matched as a set of conversation ids for the conversation list.
 */
export function createSearchStore(db: Knex) {
  return {
    /** Writes an entry, or rewrites the one of the same source (an edited note, a visitor's new name). */
    put: async (trx: Knex.Transaction, entry: SearchEntry): Promise<void> => {
      await trx('search_entries').insert(entry).onConflict(['kind', 'source_id']).merge(['body']);
    },

    /** Rewrites the cards of these conversations at once (a visitor's name or email changed). */
    async putMany(trx: Knex.Transaction, entries: SearchEntry[]): Promise<void> {
      if (entries.length) await trx('search_entries').insert(entries).onConflict(['kind', 'source_id']).merge(['body']);
    },

    remove: async (trx: Knex.Transaction, kind: SearchKind, sourceId: string): Promise<number> =>
      Number(await trx('search_entries').where({ kind, source_id: sourceId }).delete()),

    /**
     * Deleting a visitor's data: up to `limit` entries of these conversations of the site (a
     * conversation's entries are its messages, so they go in batches like the messages do).
     */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[], limit: number): Promise<number> {
      if (!conversationIds.length) return 0;
      const ids: number[] = await trx('search_entries').where('site_id', siteId).whereIn('conversation_id', conversationIds).limit(limit).pluck('id');
      return ids.length ? Number(await trx('search_entries').whereIn('id', ids).delete()) : 0;
    },

    /**
     * The ids of the site's conversations with an entry holding every word (as a prefix): a
     * subquery for the conversation list (server/conversations/store.ts), which adds its filters,
     * order and keyset position around it.
     */
    matchingConversations(siteId: string, words: readonly string[]): Knex.QueryBuilder {
      const q = db('search_entries').where('search_entries.site_id', siteId).select('search_entries.conversation_id');
      return whereFulltextMatch(db, q, 'search_entries', 'body', words);
    },

    /**
     * Whether the conversation of the enclosing query (`conversations.id`) has an entry holding
     * every word, tested on that conversation's own entries (`search_entries_conversation`) rather
     * than through the full-text index: a subquery for the search's walk (server/search/plan.ts).
     */
    conversationHasEntry(words: readonly string[]): Knex.QueryBuilder {
      const q = db('search_entries').where('search_entries.conversation_id', db.ref('conversations.id')).select(db.raw('1'));
      return whereWordsInRow(db, q, 'search_entries', 'body', words);
    },
  };
}

export type SearchStore = StoreContract<Omit<ReturnType<typeof createSearchStore>, 'matchingConversations' | 'conversationHasEntry'>> &
  Pick<ReturnType<typeof createSearchStore>, 'matchingConversations' | 'conversationHasEntry'>;
