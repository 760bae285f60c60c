import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Names for the people the inbox shows (issue 25):
 * - `accounts.display_name`: what a member is called on rows, notes and (unless the site turns it
 *   off) on their messages in the window; null shows the email's local part.
 * - `visitors`: what the site knows of a visitor beyond its id: the name and email an identity or a
 *   page gave (each with whether the site's server vouched for it), and when the visitor was first
 *   and last seen. The row is written when the visitor says who it is; a visitor who never does has
 *   none and is shown by the friendly name derived from its id (server/visitors/display-name.ts).
 *   Deleted with the visitor's data.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('accounts', (t) => {
    t.string('display_name', 80).nullable();
  });
  await knex.schema.createTable('visitors', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable();
    t.string('id', 128).notNullable();
    t.string('name', 200).nullable();
    t.boolean('name_verified').notNullable().defaultTo(false);
    t.string('email', 254).nullable();
    t.boolean('email_verified').notNullable().defaultTo(false);
    t.bigInteger('first_seen_at').notNullable();
    t.bigInteger('last_seen_at').notNullable();
    t.primary(['site_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('visitors');
  await knex.schema.alterTable('accounts', (t) => {
    t.dropColumn('display_name');
  });
}
