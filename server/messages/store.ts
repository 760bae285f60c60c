import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import { withIndex } from '../db/index-hint';
import type { Position } from '../platform/cursor';
import { precompiled, precompiledInsert } from '../db/precompiled';
import type { components } from '../../sdk/src/generated/api';

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
  /** The account that wrote a dashboard reply; null for every other origin. */
  author_id: string | null;
  content: string;
  format: MessageFormat;
  created_at: number;
  /**
   * How many files the message carries: written with the message, so a page looks attachments up
   * only when it has some. NULL on MySQL/MariaDB for a row written by code older than migration 005
   * during a rolling upgrade (036): not counted, so looked up.
   */
  attachment_count: number | null;
}

/** Whether a page must look this message's files up: it has some, or it was written without a count. */
export function mayHaveAttachments(row: Pick<MessageRow, 'attachment_count'>): boolean {
  return row.attachment_count === null || row.attachment_count > 0;
}

/** The columns of a message row, named. */
export const MESSAGE_COLUMNS = [
  'id',
  'conversation_id',
  'site_id',
  'direction',
  'origin',
  'api_key_id',
  'author_id',
  'content',
  'format',
  'created_at',
  'attachment_count',
] as const;

/** The one row mapping of `messages`: mysql2 may hand BIGINT back as a string. */
export function mapMessageRow(row: MessageRow): MessageRow {
  return withNumericColumns(row, ['created_at', 'attachment_count']);
}

/** Every column of a message row: each message is written whole. */
const insertMessage = precompiledInsert<MessageRow>('messages', MESSAGE_COLUMNS);

export function createMessageStore(db: Knex) {
  /** The page query of one order, from the start or after a position (compiled once each). */
  const pageStatement = (order: 'asc' | 'desc', withAfter: boolean) =>
    precompiled<MessageRow>(db, withAfter ? 6 : 3, (v) => {
      const q = db
        .from<MessageRow>(withIndex(db, 'messages', 'messages_conversation_created'))
        .where('conversation_id', v[0])
        .andWhere('site_id', v[1]);
      if (withAfter) {
        const op = order === 'asc' ? '>' : '<';
        const edge = order === 'asc' ? '>=' : '<=';
        q.andWhere('created_at', edge, v[2]).andWhere((w) => w.where('created_at', op, v[3]).orWhere('id', op, v[4]));
      }
      return q
        .orderBy([
          { column: 'created_at', order },
          { column: 'id', order },
        ])
        .limit(v[withAfter ? 5 : 2])
        .select(MESSAGE_COLUMNS);
    });
  const pageStatements = {
    asc: { first: pageStatement('asc', false), after: pageStatement('asc', true) },
    desc: { first: pageStatement('desc', false), after: pageStatement('desc', true) },
  };
  return {
    insert: (trx: Knex.Transaction, row: MessageRow) => insertMessage(trx, row),

    /**
     * Deleting a visitor's data: up to `limit` messages of these conversations of the site, with
     * their direction (a visitor's files give their bytes back to the site's quota), through the
     * conversation index.
     */
    async someOf(trx: Knex, siteId: string, conversationIds: string[], limit: number): Promise<{ id: string; direction: MessageDirection }[]> {
      if (!conversationIds.length) return [];
      return trx('messages').whereIn('conversation_id', conversationIds).andWhere('site_id', siteId).limit(limit).select('id', 'direction');
    },

    /** Deleting a visitor's data: these messages (their files and the window's client ids went first). */
    removeMany: async (trx: Knex.Transaction, ids: string[]): Promise<number> => (ids.length ? Number(await trx('messages').whereIn('id', ids).delete()) : 0),

    async findById(id: string): Promise<MessageRow | undefined> {
      const r: MessageRow | undefined = await db('messages').where({ id }).first(MESSAGE_COLUMNS);
      return r && mapMessageRow(r);
    },

    /**
     * Messages of a conversation from `createdAt` on (inclusive: messages written in the same
     * millisecond as the last one delivered may sort before it by id), oldest first.
     */
    async fromTime(conversationId: string, createdAt: number, limit: number): Promise<MessageRow[]> {
      const rows: MessageRow[] = await db('messages')
        .where('conversation_id', conversationId)
        .andWhere('created_at', '>=', createdAt)
        .orderBy([
          { column: 'created_at', order: 'asc' },
          { column: 'id', order: 'asc' },
        ])
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

    /**
     * One page of a conversation of the site, oldest first (or newest with desc) by (created_at, id):
     * a keyset range scan on messages_conversation_created. The site is checked on the messages'
     * own `site_id` (their conversation's, copied when written), so a conversation of another site
     * gives an empty page here, and the caller tells "no such conversation" from "no more messages"
     * only when the page is empty.
     */
    async page(siteId: string, conversationId: string, order: 'asc' | 'desc', after: Position | undefined, limit: number): Promise<MessageRow[]> {
      const statement = pageStatements[order][after ? 'after' : 'first'];
      const values = after ? [conversationId, siteId, after.createdAt, after.createdAt, after.id, limit] : [conversationId, siteId, limit];
      const rows = await statement(values);
      return rows.map(mapMessageRow);
    },
  };
}

export type MessageStore = ReturnType<typeof createMessageStore>;
