import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Shared replies and agent names (issue 25; DECISIONS "The inbox in depth"):
 * - `shared_replies`: a site's canned replies, kept by its owners and inserted by every member with
 *   the composer's `/` picker (server/replies/). Titles are unique per site without regard to case
 *   (`title_key` is the lower-cased title, since the tables compare byte for byte); the unique
 *   index also serves the list, which is read whole and sorted by title.
 * - `site_window_settings.agent_names`: whether the chat window shows the agent's display name on
 *   a reply (the default) or the site's name; a site without a settings row shows names.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('shared_replies', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('title', 60).notNullable();
    t.string('title_key', 120).notNullable(); // lower-casing may lengthen (İ becomes i̇)
    t.text('body').notNullable();
    t.string('created_by', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['site_id', 'title_key'], { indexName: 'shared_replies_site_title' });
  });
  await knex.schema.alterTable('site_window_settings', (t) => {
    t.boolean('agent_names').notNullable().defaultTo(true);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('site_window_settings', (t) => {
    t.dropColumn('agent_names');
  });
  await knex.schema.dropTable('shared_replies');
}
