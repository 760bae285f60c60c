import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';

/** A site's tag (019_tags.ts). */
export interface TagRow {
  id: string;
  site_id: string;
  name: string;
  /** The lower-cased name: unique per site, and the list's order. */
  name_key: string;
  created_at: number;
}

const COLUMNS = ['id', 'site_id', 'name', 'name_key', 'created_at'] as const;

/** The one row mapping of `tags` (mysql2 may hand BIGINT back as a string). */
export const mapTagRow = (row: TagRow): TagRow => withNumericColumns(row, ['created_at']);

/** A tag on a conversation as a part of another statement reads it (`tagsOnConversations`). */
export interface TagOnConversation {
  conversation_id: string;
  tag_id: string;
  tag_name: string;
  tag_key: string;
}

const onConversations = (db: Knex, siteId: string, conversationIds: readonly string[]) =>
  db('conversation_tags as ct')
    .join('tags as t', 't.id', 'ct.tag_id')
    .where('ct.site_id', siteId)
    .whereIn('ct.conversation_id', [...new Set(conversationIds)]);

/**
 * The tags on these conversations of the site as TagOnConversation rows, unordered and not yet
 * sent: a part another read sends in its own statement (the inbox page's, beside its unread
 * counts), ordering its rows by `tag_key`, `tag_id` as `ofConversations` does.
 */
export const tagsOnConversations = (db: Knex, siteId: string, conversationIds: readonly string[]): Knex.QueryBuilder =>
  onConversations(db, siteId, conversationIds).select('ct.conversation_id', 't.id as tag_id', 't.name as tag_name', 't.name_key as tag_key');

/** The tags' tables, `tags` and `conversation_tags`: written here only. */
export function createTagStore(db: Knex) {
  return {
    db,
    /** Every tag of the site, by name (a site keeps a bounded number: the service's limit). */
    async list(siteId: string, trx: Knex = db): Promise<TagRow[]> {
      const rows: TagRow[] = await trx('tags')
        .where({ site_id: siteId })
        .orderBy([{ column: 'name_key' }, { column: 'id' }])
        .select(COLUMNS);
      return rows.map(mapTagRow);
    },

    /**
     * The name keys of the site's tags, read with a lock on the site's part of the index (MySQL:
     * the range and its gap), so two owners adding at once count one after the other and the
     * limit holds. SQLite serialises writers anyway.
     */
    lockNameKeys: (siteId: string, trx: Knex.Transaction): Promise<{ id: string; name_key: string }[]> =>
      forUpdate(trx, trx('tags').where({ site_id: siteId }).select('id', 'name_key')),

    async find(siteId: string, id: string, trx: Knex = db): Promise<TagRow | undefined> {
      const row: TagRow | undefined = await trx('tags').where({ site_id: siteId, id }).first(COLUMNS);
      return row && mapTagRow(row);
    },

    insert: async (row: TagRow, trx: Knex) => void (await trx('tags').insert(row)),

    rename: async (siteId: string, id: string, change: Pick<TagRow, 'name' | 'name_key'>, trx: Knex) =>
      Number(await trx('tags').where({ site_id: siteId, id }).update(change)) > 0,

    /** Deletes a tag of the site and takes it off every conversation; false when there was none. */
    async remove(siteId: string, id: string, trx: Knex): Promise<boolean> {
      await trx('conversation_tags').where({ site_id: siteId, tag_id: id }).delete();
      return Number(await trx('tags').where({ site_id: siteId, id }).delete()) > 0;
    },

    /** The tags on these conversations of the site, by name: one read for a whole page of rows. */
    async ofConversations(siteId: string, conversationIds: readonly string[], trx: Knex = db): Promise<Map<string, TagRow[]>> {
      const byConversation = new Map<string, TagRow[]>();
      if (!conversationIds.length) return byConversation;
      const rows: (TagRow & { conversation_id: string })[] = await onConversations(trx, siteId, conversationIds)
        .orderBy([{ column: 't.name_key' }, { column: 't.id' }])
        .select('ct.conversation_id', ...COLUMNS.map((c) => `t.${c}`));
      for (const r of rows) {
        const list = byConversation.get(r.conversation_id) ?? [];
        list.push(mapTagRow({ id: r.id, site_id: r.site_id, name: r.name, name_key: r.name_key, created_at: r.created_at }));
        byConversation.set(r.conversation_id, list);
      }
      return byConversation;
    },

    /** The tag ids on a conversation, locked (two members tagging at once count one after the other). */
    lockOnConversation: async (conversationId: string, trx: Knex.Transaction): Promise<string[]> =>
      ((await forUpdate(trx, trx('conversation_tags').where({ conversation_id: conversationId }).select('tag_id'))) as { tag_id: string }[]).map(
        (r) => r.tag_id,
      ),

    apply: async (siteId: string, conversationId: string, tagId: string, at: number, trx: Knex) =>
      void (await trx('conversation_tags').insert({ site_id: siteId, conversation_id: conversationId, tag_id: tagId, created_at: at })),

    /** Takes a tag off a conversation; false when it was not on it. */
    unapply: async (conversationId: string, tagId: string, trx: Knex) =>
      Number(await trx('conversation_tags').where({ conversation_id: conversationId, tag_id: tagId }).delete()) > 0,

    /** Deleting a visitor's data: the tags on these conversations of the site. */
    removeForConversations: async (trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> =>
      conversationIds.length ? Number(await trx('conversation_tags').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete()) : 0,
  };
}

export type TagStore = StoreContract<ReturnType<typeof createTagStore>>;
