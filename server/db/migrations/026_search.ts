import type { Knex } from 'knex';
import { binaryText } from './columns';
import { createFulltextIndex, dropFulltextIndex } from '../fulltext';

/**
 * The inbox's search (issue 25, item 2; docs/manage.md, "Search"), a read model owned by
 * server/search/store.ts: one entry per thing a member may find a conversation by, written in the
 * transaction of the change it mirrors and removed with it.
 * - `kind` `message`: a message's text (`source_id` its id); `note`: an internal note's text
 *   (member-only, like the inbox); `card`: the conversation's id, its visitor's id, name, email
 *   and the friendly name the inbox shows (`source_id` the conversation id).
 * - `body` carries a full-text index (server/db/fulltext.ts: InnoDB FULLTEXT with an empty stopword list
 *   on MySQL/MariaDB, FTS5 on SQLite);
 * - `(kind, source_id)` finds an entry to rewrite or remove; `conversation_id` removes a
 *   conversation's entries (deleting a visitor's data).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('search_entries', (t) => {
    binaryText(knex, t);
    t.bigIncrements('id').primary();
    t.string('site_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    t.string('kind', 8).notNullable();
    t.string('source_id', 128).notNullable();
    t.text('body').notNullable();
    t.bigInteger('created_at').notNullable();
    t.unique(['kind', 'source_id'], { indexName: 'search_entries_source' });
    t.index(['conversation_id'], 'search_entries_conversation');
  });
  await createFulltextIndex(knex, 'search_entries', 'body', 'search_entries_body');
}

export async function down(knex: Knex): Promise<void> {
  await dropFulltextIndex(knex, 'search_entries', 'search_entries_body');
  await knex.schema.dropTable('search_entries');
}
