import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';

/** A site's shared reply (024_shared_replies.ts). */
export interface SharedReplyRow {
  id: string;
  site_id: string;
  title: string;
  /** The lower-cased title: unique per site, and the list's order. */
  title_key: string;
  body: string;
  /** The account that made it; null for the operator or an account since deleted. */
  created_by: string | null;
  created_at: number;
  updated_at: number;
}

const COLUMNS = ['id', 'site_id', 'title', 'title_key', 'body', 'created_by', 'created_at', 'updated_at'] as const;

/** The one row mapping of `shared_replies` (mysql2 may hand BIGINT back as a string). */
export const mapSharedReplyRow = (row: SharedReplyRow): SharedReplyRow => withNumericColumns(row, ['created_at', 'updated_at']);

/** The shared replies' table: written here only. */
export function createSharedReplyStore(db: Knex) {
  return {
    db,
    /** Every reply of the site, by title (a site keeps a bounded number: the service's limit). */
    async list(siteId: string, trx: Knex = db): Promise<SharedReplyRow[]> {
      const rows: SharedReplyRow[] = await trx('shared_replies')
        .where({ site_id: siteId })
        .orderBy([{ column: 'title_key' }, { column: 'id' }])
        .select(COLUMNS);
      return rows.map(mapSharedReplyRow);
    },

    /**
     * The title keys of the site's replies, read with a lock on the site's part of the index
     * (MySQL: the range and its gap), so two owners adding at once count one after the other and
     * the limit holds. SQLite serialises writers anyway.
     */
    async lockTitleKeys(siteId: string, trx: Knex.Transaction): Promise<{ id: string; title_key: string }[]> {
      return forUpdate(trx, trx('shared_replies').where({ site_id: siteId }).select('id', 'title_key'));
    },

    async find(siteId: string, id: string, trx: Knex = db): Promise<SharedReplyRow | undefined> {
      const row: SharedReplyRow | undefined = await trx('shared_replies').where({ site_id: siteId, id }).first(COLUMNS);
      return row && mapSharedReplyRow(row);
    },

    async insert(rows: SharedReplyRow[], trx: Knex): Promise<void> {
      if (rows.length) await trx('shared_replies').insert(rows);
    },

    /** Changes a reply of the site; false when there is none. */
    async update(
      siteId: string,
      id: string,
      change: Partial<Pick<SharedReplyRow, 'title' | 'title_key' | 'body' | 'updated_at'>>,
      trx: Knex,
    ): Promise<boolean> {
      return Number(await trx('shared_replies').where({ site_id: siteId, id }).update(change)) > 0;
    },

    /** Deletes a reply of the site; false when there was none. */
    async remove(siteId: string, id: string, trx: Knex): Promise<boolean> {
      return Number(await trx('shared_replies').where({ site_id: siteId, id }).delete()) > 0;
    },
  };
}

export type SharedReplyStore = StoreContract<ReturnType<typeof createSharedReplyStore>>;
