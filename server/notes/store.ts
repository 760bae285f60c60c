import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { withIndex } from '../db/index-hint';
import type { StoreContract } from '../db/store-contract';
import type { Position } from '../platform/cursor';

/** A note as stored (021_notes.ts). */
export interface NoteRow {
  id: string;
  site_id: string;
  conversation_id: string;
  author_id: string;
  content: string;
  format: 'plain' | 'markdown';
  /** JSON array of the account ids its mentions named. */
  mentions: string;
  created_at: number;
  edited_at: number | null;
}

/** A note as the service reads it: the row with its mentions parsed. */
export type StoredNote = Omit<NoteRow, 'mentions'> & { mentions: string[] };

const COLUMNS = ['id', 'site_id', 'conversation_id', 'author_id', 'content', 'format', 'mentions', 'created_at', 'edited_at'] as const;

/** The one row mapping of `notes`: mysql2 may hand BIGINT back as a string; the mentions are JSON text. */
export function mapNoteRow(raw: NoteRow): StoredNote {
  const row = withNumericColumns(raw, ['created_at', 'edited_at']);
  let mentions: string[] = [];
  try {
    const parsed: unknown = JSON.parse(row.mentions);
    if (Array.isArray(parsed)) mentions = parsed.filter((x): x is string => typeof x === 'string');
  } catch {
    // an unreadable list names nobody
  }
  return { ...row, mentions };
}

const toColumns = (n: StoredNote): NoteRow => ({ ...n, mentions: JSON.stringify(n.mentions) });

/**
 * The notes table: its only reader and writer. Nothing here is joined by the messages' readers, and
 * nothing here reads theirs: a note reaches a member through this store and the notes service only.
 */
export function createNoteStore(db: Knex) {
  return {
    db,

    insert: async (trx: Knex.Transaction, note: StoredNote): Promise<void> => {
      await trx('notes').insert(toColumns(note));
    },

    /** A note of the conversation on the site (undefined for another site's or conversation's). */
    async find(siteId: string, conversationId: string, id: string, trx: Knex = db): Promise<StoredNote | undefined> {
      const r: NoteRow | undefined = await trx('notes').where({ id, site_id: siteId, conversation_id: conversationId }).first(COLUMNS);
      return r && mapNoteRow(r);
    },

    /** The same, locked until the caller's transaction ends (an edit and a delete at once meet here). */
    async findForUpdate(trx: Knex.Transaction, siteId: string, conversationId: string, id: string): Promise<StoredNote | undefined> {
      const r: NoteRow | undefined = await forUpdate(trx, trx('notes').where({ id, site_id: siteId, conversation_id: conversationId }).first(COLUMNS));
      return r && mapNoteRow(r);
    },

    update: async (trx: Knex.Transaction, id: string, change: Pick<StoredNote, 'content' | 'format' | 'mentions' | 'edited_at'>): Promise<void> => {
      await trx('notes')
        .where({ id })
        .update({ ...change, mentions: JSON.stringify(change.mentions) });
    },

    remove: async (trx: Knex.Transaction, id: string): Promise<number> => Number(await trx('notes').where({ id }).delete()),

    /**
     * One page of a conversation's notes, oldest first (or newest with desc) by (created_at, id): a
     * keyset range on notes_conversation_created, flat at any depth. Another site's conversation
     * gives an empty page.
     */
    async page(siteId: string, conversationId: string, order: 'asc' | 'desc', after: Position | undefined, limit: number): Promise<StoredNote[]> {
      const q = db
        .from(withIndex(db, 'notes', 'notes_conversation_created'))
        .where('conversation_id', conversationId)
        .andWhere('site_id', siteId);
      if (after) {
        const op = order === 'asc' ? '>' : '<';
        q.andWhere('created_at', order === 'asc' ? '>=' : '<=', after.createdAt).andWhere((w) =>
          w.where('created_at', op, after.createdAt).orWhere('id', op, after.id),
        );
      }
      const rows: NoteRow[] = await q
        .orderBy([
          { column: 'created_at', order },
          { column: 'id', order },
        ])
        .limit(limit)
        .select(COLUMNS);
      return rows.map(mapNoteRow);
    },

    /** The conversation's notes written from `from` to `to` (inclusive), oldest first, at most `limit` (a timeline page's window). */
    async between(siteId: string, conversationId: string, from: number, to: number, limit: number): Promise<StoredNote[]> {
      const rows: NoteRow[] = await db
        .from(withIndex(db, 'notes', 'notes_conversation_created'))
        .where('conversation_id', conversationId)
        .andWhere('site_id', siteId)
        .andWhere('created_at', '>=', from)
        .andWhere('created_at', '<=', to)
        .orderBy([
          { column: 'created_at', order: 'asc' },
          { column: 'id', order: 'asc' },
        ])
        .limit(limit)
        .select(COLUMNS);
      return rows.map(mapNoteRow);
    },

    /**
     * Removes every note of these conversations of the site, in the caller's transaction (deleting a
     * visitor's data removes its conversations, and their notes with them). Answers how many went.
     */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      return Number(await trx('notes').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete());
    },
  };
}

export type NoteStore = StoreContract<ReturnType<typeof createNoteStore>>;
