import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Email links (docs/manage.md, "Verified email"): one row per link that proves a mailbox, to verify
 * the account's email or to move the account to a new one (`email`: the address the link was sent
 * to). Only the SHA-256 of its token is stored; valid 24 hours, taken once (`used_at`). A new table:
 * the previous release never reads it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('email_links', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('account_id', 40).notNullable();
    t.string('email', 254).notNullable();
    t.string('token_hash', 64).notNullable().unique();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['account_id'], 'email_links_account');
    t.index(['expires_at'], 'email_links_expiry');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('email_links');
}
