import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';

export interface AttachmentRow {
  id: string;
  site_id: string;
  message_id: string | null;
  name: string;
  mime_type: string;
  size: number;
  sha256: string;
  storage_key: string;
  created_at: number;
}

const COLUMNS = ['id', 'site_id', 'message_id', 'name', 'mime_type', 'size', 'sha256', 'storage_key', 'created_at'] as const;

/** The one row mapping of `attachments`: mysql2 may hand BIGINT back as a string. */
export function mapAttachmentRow(row: AttachmentRow): AttachmentRow {
  return withNumericColumns(row, ['size', 'created_at']);
}

const normalise = (row: AttachmentRow | undefined) => row && mapAttachmentRow(row);

export function createMediaStore(db: Knex) {
  return {
    insert: (trx: Knex.Transaction, rows: AttachmentRow[]) => (rows.length ? trx('attachments').insert(rows) : Promise.resolve()),
    find: async (siteId: string, id: string) => normalise(await db<AttachmentRow>('attachments').where({ site_id: siteId, id }).first(COLUMNS)),
    findById: async (id: string) => normalise(await db<AttachmentRow>('attachments').where({ id }).first(COLUMNS)),
    async forMessages(messageIds: string[], trx: Knex = db): Promise<AttachmentRow[]> {
      if (messageIds.length === 0) return [];
      const rows: AttachmentRow[] = await trx<AttachmentRow>('attachments').whereIn('message_id', messageIds).orderBy(['created_at', 'id']).select(COLUMNS);
      return rows.map(mapAttachmentRow);
    },
    /** Deleting a visitor's data: the attachment rows of these messages, locked, then gone; answers them (their files go after the commit). */
    async removeForMessages(trx: Knex.Transaction, messageIds: string[]): Promise<AttachmentRow[]> {
      if (messageIds.length === 0) return [];
      const rows: AttachmentRow[] = await forUpdate(trx, trx<AttachmentRow>('attachments').whereIn('message_id', messageIds).select(COLUMNS));
      if (rows.length)
        await trx('attachments')
          .whereIn(
            'id',
            rows.map((r) => r.id),
          )
          .delete();
      return rows.map(mapAttachmentRow);
    },
    /** Which of these stored file names an attachment row still points to (the rest are orphans). */
    async existingStorageKeys(storageKeys: string[]): Promise<Set<string>> {
      if (storageKeys.length === 0) return new Set();
      return new Set((await db('attachments').whereIn('storage_key', storageKeys).pluck('storage_key')) as string[]);
    },
  };
}

export type MediaStore = ReturnType<typeof createMediaStore>;
