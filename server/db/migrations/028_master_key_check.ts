import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * The master key's check value (platform/master-key-check.ts): at most one row, under the fixed id
 * `master`, so two processes starting at once cannot both write one (the second finds the first's).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('master_key_check', (t) => {
    binaryText(knex, t);
    t.string('id', 20).primary();
    t.string('check_value', 64).notNullable();
    t.bigInteger('created_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('master_key_check');
}
