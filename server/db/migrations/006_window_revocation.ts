import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Revoking the chat window's visitors: a visitor credential lives 180 days and is
 * checked by its signature alone, so voiding one needs a time to compare its issue time with.
 * - per visitor: window credentials and sessions of that visitor begun at or before
 *   `revoked_before` are void (`visitor revoke --site S --visitor V`);
 * - per site: `site_window_settings.visitors_revoked_before` does the same for every visitor of
 *   the site (`visitor revoke --site S --all`).
 * Both are read with the site's window settings in the one query a window request makes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('window_visitor_revocations', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('visitor_id', 128).notNullable();
    t.bigInteger('revoked_before').notNullable(); // ms
    t.primary(['site_id', 'visitor_id']);
  });
  await knex.schema.alterTable('site_window_settings', (t) => {
    t.bigInteger('visitors_revoked_before').nullable(); // ms; null: none revoked
  });
}

export async function down(knex: Knex): Promise<void> {
  // Plain ALTER TABLE ... DROP COLUMN (see 005_read_path.ts).
  await knex.raw('alter table ?? drop column ??', ['site_window_settings', 'visitors_revoked_before']);
  await knex.schema.dropTableIfExists('window_visitor_revocations');
}
