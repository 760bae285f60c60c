import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * The chat window's entry (issue 9):
 * - per site: the origins allowed to embed the window and ask for window tokens, and the optional
 *   identity verification (mode and the per-site secret, encrypted at rest because it is needed to
 *   verify, like webhook signing secrets);
 * - the window's client message ids: one row per (site, visitor, client id), so a resend after a
 *   reload or reconnect finds the message it already made instead of posting a second one;
 * - an index to find a visitor's conversations in order (current conversation, live updates).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('site_allowed_origins', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('origin', 300).notNullable(); // exact serialised origin, e.g. https://shop.example:8443
    t.primary(['site_id', 'origin']);
  });

  await knex.schema.createTable('site_window_settings', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).primary().references('id').inTable('sites');
    t.string('identity_mode', 16).notNullable(); // off | optional | enforce
    t.text('identity_secret_encrypted').nullable();
    t.bigInteger('updated_at').notNullable();
  });

  await knex.schema.createTable('window_client_messages', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable();
    t.string('visitor_id', 128).notNullable();
    t.string('client_message_id', 64).notNullable();
    t.string('message_id', 40).notNullable().references('id').inTable('messages');
    t.string('request_hash', 64).notNullable(); // SHA-256 of content and format: a reuse for other text is refused
    t.bigInteger('created_at').notNullable();
    t.primary(['site_id', 'visitor_id', 'client_message_id']);
  });

  await knex.schema.alterTable('conversations', (t) => {
    t.index(['site_id', 'visitor_id', 'created_at', 'id'], 'conversations_site_visitor_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['site_id', 'visitor_id', 'created_at', 'id'], 'conversations_site_visitor_created');
  });
  for (const table of ['window_client_messages', 'site_window_settings', 'site_allowed_origins']) {
    await knex.schema.dropTableIfExists(table);
  }
}
