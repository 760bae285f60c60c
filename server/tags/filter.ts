import type { Knex } from 'knex';

/**
 * The tag filter of a conversation list (server/conversations/filter.ts): conversations carrying
 * the tag, one primary-key look-up in `conversation_tags` (019_tags.ts) per conversation walked.
 * The tags feature owns that table; this is its read for the list.
 */
export function whereTagged(db: Knex, q: Knex.QueryBuilder, siteId: string, tagId: string): Knex.QueryBuilder {
  return q.whereExists(
    db('conversation_tags')
      .where('conversation_tags.conversation_id', db.ref('conversations.id'))
      .andWhere('conversation_tags.tag_id', tagId)
      .andWhere('conversation_tags.site_id', siteId)
      .select(db.raw('1')),
  );
}
