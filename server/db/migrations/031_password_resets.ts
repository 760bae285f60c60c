import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Forgot password (docs/manage.md, "Forgot password"): one row per link sent, only the SHA-256 of
 * its token stored, valid one hour, taken once (`used_at`). Rows past their hour are removed by
 * maintenance.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('password_resets', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('account_id', 40).notNullable();
    t.string('token_hash', 64).notNullable().unique();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['account_id'], 'password_resets_account');
    t.index(['expires_at'], 'password_resets_expiry');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('password_resets');
}
