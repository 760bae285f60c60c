import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';

export interface SeenRow {
  conversation_id: string;
  site_id: string;
  message_id: string;
  message_created_at: number;
  seen_at: number;
}

/** The `conversation_seen` table (migration 025): the newest agent reply each conversation's visitor was shown. */
export function createSeenStore(db: Knex) {
  const row = (r: SeenRow | undefined) => (r ? withNumericColumns(r, ['message_created_at', 'seen_at']) : undefined);
  return {
    async find(siteId: string, conversationId: string, trx: Knex = db): Promise<SeenRow | undefined> {
      return row(await trx<SeenRow>('conversation_seen').where({ site_id: siteId, conversation_id: conversationId }).first());
    },

    /** Writes the mark; the caller holds the conversation's lock and decided that it moves forward. */
    async put(trx: Knex.Transaction, mark: SeenRow, existed: boolean): Promise<void> {
      if (existed) {
        const { conversation_id, ...rest } = mark;
        await trx('conversation_seen').where({ conversation_id }).update(rest);
      } else await trx('conversation_seen').insert(mark);
    },

    /** Deleting a visitor's data: the marks of these conversations. */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      return Number(await trx('conversation_seen').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete());
    },
  };
}

export type SeenStore = StoreContract<ReturnType<typeof createSeenStore>>;
