import type { Knex } from 'knex';
import { binaryText, widenString } from './columns';

/**
 * The visitor in context (issue 25, item 3; docs/window.md, "What the window collects"):
 * - `visitor_context_settings`: per site, whether the window reports the pages a visitor is on
 *   (none: on) and whether their query strings are kept (none: stripped);
 * - `conversation_environments`: per conversation, what the window last said of the visitor's
 *   browser: language, time zone, browser and operating system as parsed from the user agent
 *   (the user agent itself is not kept);
 * - `conversation_pages`: the pages the visitor was on while the conversation was open, at most 50
 *   a conversation (the oldest go first), with `(conversation_id, viewed_at, id)` for the panel's
 *   read and `viewed_at` for the retention sweep;
 * - `visitor_attributes`: the identity's custom attributes, each marked verified (an identity
 *   token the site's server signed) or not (passed by a page);
 * - `inbox_reads` by conversation: deleting a visitor's data removes its conversations' read marks
 *   without reading every member's marks;
 * - `audit_log.object_id` takes a whole visitor id (128 characters): deleting or revoking a
 *   visitor names it there, and MySQL's strict mode refused the longer ids.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('visitor_context_settings', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).primary().references('id').inTable('sites');
    t.boolean('page_tracking').notNullable().defaultTo(true);
    t.boolean('keep_query').notNullable().defaultTo(false);
    t.bigInteger('updated_at').notNullable();
  });
  await knex.schema.createTable('conversation_environments', (t) => {
    binaryText(knex, t);
    t.string('conversation_id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('language', 35).nullable();
    t.string('time_zone', 64).nullable();
    t.string('browser', 64).nullable();
    t.string('browser_version', 32).nullable();
    t.string('os', 64).nullable();
    t.string('os_version', 32).nullable();
    t.string('device', 16).nullable();
    t.bigInteger('reported_at').notNullable();
    t.index(['reported_at'], 'conversation_environments_reported');
  });
  await knex.schema.createTable('conversation_pages', (t) => {
    binaryText(knex, t);
    t.increments('id').primary();
    t.string('conversation_id', 40).notNullable();
    t.string('site_id', 40).notNullable();
    t.string('url', 2048).notNullable();
    t.string('title', 300).nullable();
    t.string('referrer', 2048).nullable();
    t.bigInteger('viewed_at').notNullable();
    t.index(['conversation_id', 'viewed_at', 'id'], 'conversation_pages_conversation');
    t.index(['viewed_at'], 'conversation_pages_viewed');
  });
  await knex.schema.createTable('visitor_attributes', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable();
    t.string('visitor_id', 128).notNullable();
    t.string('name', 64).notNullable();
    t.string('type', 8).notNullable(); // string | number | boolean
    t.string('value', 500).notNullable(); // the string itself, or the number or boolean as JSON writes it
    t.boolean('verified').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['site_id', 'visitor_id', 'name']);
  });
  await knex.schema.alterTable('inbox_reads', (t) => {
    t.index(['conversation_id'], 'inbox_reads_conversation');
  });
  await widenString(knex, 'audit_log', 'object_id', 128, true);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbox_reads', (t) => {
    t.dropIndex(['conversation_id'], 'inbox_reads_conversation');
  });
  for (const table of ['visitor_attributes', 'conversation_pages', 'conversation_environments', 'visitor_context_settings']) {
    await knex.schema.dropTableIfExists(table);
  }
  // audit_log.object_id stays 128 long: shortening it could cut entries written since.
}
