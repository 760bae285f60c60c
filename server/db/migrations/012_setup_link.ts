import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * The first-start setup link (docs/manage.md, "The first owner"): at most one row, under the fixed
 * id `first-owner`, so a new link replaces the old one by its primary key whatever the number of
 * instances writing at once. Only the SHA-256 of the link's token is stored. The row is removed
 * when the link is used and whenever an account is made another way.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('setup_links', (t) => {
    binaryText(knex, t);
    t.string('id', 20).primary();
    t.string('token_hash', 64).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('setup_links');
}
