import type { Knex } from 'knex';

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

export function createMediaStore(db: Knex) {
  return {
    insert: (trx: Knex.Transaction, rows: AttachmentRow[]) => (rows.length ? trx('attachments').insert(rows) : Promise.resolve()),
    find: (siteId: string, id: string) => db<AttachmentRow>('attachments').where({ site_id: siteId, id }).first(),
    findById: (id: string) => db<AttachmentRow>('attachments').where({ id }).first(),
    async forMessages(messageIds: string[], trx: Knex = db): Promise<AttachmentRow[]> {
      if (messageIds.length === 0) return [];
      const rows = await trx<AttachmentRow>('attachments').whereIn('message_id', messageIds).orderBy(['created_at', 'id']);
      return rows.map((r) => ({ ...r, size: Number(r.size) }));
    },
    /** Which of these stored file names an attachment row still points to (the rest are orphans). */
    async existingStorageKeys(storageKeys: string[]): Promise<Set<string>> {
      if (storageKeys.length === 0) return new Set();
      return new Set((await db('attachments').whereIn('storage_key', storageKeys).pluck('storage_key')) as string[]);
    },
  };
}

export type MediaStore = ReturnType<typeof createMediaStore>;
