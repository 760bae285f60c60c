import type { Knex } from 'knex';
import { setStringNullable } from './columns';

/**
 * Site-level rows of the inbox feed (`inbox_activity`): a change that belongs to no conversation (a
 * tag renamed or deleted) is a row with a null `conversation_id`, shown to every member of the site.
 * Expand only: the previous release never writes such a row, and reading one it streams the row's
 * body under its kind, which its dashboard leaves alone (a name it does not know). SQLite copies the
 * table for the change (nothing refers to it; the embedded database has one process, so no older
 * code writes it meanwhile).
 */
export async function up(knex: Knex): Promise<void> {
  await setStringNullable(knex, 'inbox_activity', 'conversation_id', 40, true);
}

/** Site-level rows go (a NOT NULL column cannot keep them); the rest of the feed stays. */
export async function down(knex: Knex): Promise<void> {
  await knex('inbox_activity').whereNull('conversation_id').delete();
  await setStringNullable(knex, 'inbox_activity', 'conversation_id', 40, false);
}
