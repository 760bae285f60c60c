import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { VisitorFiles } from './visitor-files';
import type { BlobStore } from './blob-store';

interface ExpiredRow {
  id: string;
  site_id: string;
  size: number;
  storage_key: string;
  direction: string | null;
}

/**
 * The media retention (MEDIA_RETENTION_DAYS): attachments created before `before` lose their row
 * and their file, oldest first, in batches. A message keeps its text and simply lists no attachment
 * for a removed file, so it never shows a dead link; the file's own links answer 404. Visitor files
 * give their bytes back to the site's stored quota in the transaction that deletes their rows.
 * The rows are read under lock inside that transaction, so instances sweeping at once never count
 * a file twice; the files go after the commit (a crash in between, or a media store that fails
 * then, leaves orphans, which the orphan sweep removes).
 */
export async function removeExpiredMedia(deps: { db: Knex; visitorFiles: VisitorFiles; blobs: BlobStore }, before: number, batchSize = 500): Promise<number> {
  const { db } = deps;
  let removed = 0;
  for (;;) {
    const rows = await runInTransaction(
      db,
      async (trx) => {
        const query = trx('attachments')
          .leftJoin('messages', 'messages.id', 'attachments.message_id')
          .where('attachments.created_at', '<', before)
          .orderBy([{ column: 'attachments.created_at' }, { column: 'attachments.id' }])
          .limit(batchSize)
          .select('attachments.id', 'attachments.site_id', 'attachments.size', 'attachments.storage_key', 'messages.direction');
        const found = ((await forUpdate(trx, query)) as ExpiredRow[]).map((r) => withNumericColumns(r, ['size']));
        if (found.length === 0) return found;
        await trx('attachments')
          .whereIn(
            'id',
            found.map((r) => r.id),
          )
          .delete();
        const freed = new Map<string, number>();
        for (const r of found) if (r.direction === 'incoming') freed.set(r.site_id, (freed.get(r.site_id) ?? 0) + r.size);
        // Sites in one order, so two sweeps lock their rows the same way round.
        for (const siteId of [...freed.keys()].sort()) await deps.visitorFiles.release(trx, siteId, freed.get(siteId)!);
        return found;
      },
      // No gap locks on MySQL: new attachments keep arriving at the end of the same index.
      { isolation: 'read committed', whenBusy: 'rethrow' },
    );
    await deps.blobs.remove(rows.map((r) => r.storage_key)).catch(() => undefined);
    removed += rows.length;
    if (rows.length < batchSize) return removed;
  }
}
