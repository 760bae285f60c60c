import type { Knex } from 'knex';
import type { Position } from '../platform/cursor';
import type { components } from '../generated/api';

export type Message = components['schemas']['Message'];
export type MessageDirection = components['schemas']['MessageDirection'];
export type MessageOrigin = components['schemas']['MessageOrigin'];
export type MessageFormat = components['schemas']['MessageFormat'];

export interface MessageRow {
  id: string;
  conversation_id: string;
  site_id: string;
  direction: MessageDirection;
  origin: MessageOrigin;
  api_key_id: string | null;
  content: string;
  format: MessageFormat;
  created_at: number;
}

export function createMessageStore(db: Knex) {
  return {
    insert: (trx: Knex.Transaction, row: MessageRow) => trx('messages').insert(row),

    /** Oldest first (or newest with desc) by (created_at, id): a range scan on messages_conversation_created. */
    async list(conversationId: string, order: 'asc' | 'desc', after: Position | undefined, limit: number): Promise<MessageRow[]> {
      const q = db<MessageRow>('messages').where('conversation_id', conversationId);
      if (after) {
        const op = order === 'asc' ? '>' : '<';
        const edge = order === 'asc' ? '>=' : '<=';
        q.andWhere('created_at', edge, after.createdAt).andWhere((w) =>
          w.where('created_at', op, after.createdAt).orWhere('id', op, after.id),
        );
      }
      const rows = await q.orderBy([{ column: 'created_at', order }, { column: 'id', order }]).limit(limit);
      return rows.map((r) => ({ ...r, created_at: Number(r.created_at) }));
    },
  };
}

export type MessageStore = ReturnType<typeof createMessageStore>;
