import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Tags (issue 25; DECISIONS "The inbox in depth"): an owner keeps a site's list, members put them
 * on conversations, the inbox and its search filter by them.
 * - `tags`: per site, unique without regard to case (`name_key` is the lower-cased name, since
 *   the tables compare byte for byte), at most 50 characters.
 * - `conversation_tags`: which tag is on which conversation; `(site_id, tag_id, conversation_id)`
 *   serves the inbox's filter, the primary key a conversation's own tags.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('tags', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('name', 50).notNullable();
    t.string('name_key', 50).notNullable();
    t.bigInteger('created_at').notNullable();
    t.unique(['site_id', 'name_key'], { indexName: 'tags_site_name' });
  });
  await knex.schema.createTable('conversation_tags', (t) => {
    binaryText(knex, t);
    t.string('conversation_id', 40).notNullable();
    t.string('tag_id', 40).notNullable();
    t.string('site_id', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['conversation_id', 'tag_id']);
    t.index(['site_id', 'tag_id', 'conversation_id'], 'conversation_tags_site_tag');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('conversation_tags');
  await knex.schema.dropTable('tags');
}
