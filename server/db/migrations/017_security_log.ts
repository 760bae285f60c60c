import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * - `security_log`: what happened to an account's credentials (sign-ins, failed ones, sessions
 *   ended, password and token changes, re-authentication), read by the account itself; kept 90 days.
 * - `sessions.reauthenticated_at`: when the session last proved the password again, which opens
 *   its "sudo" window (a sign-in opens it too, from `created_at`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('security_log', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('account_id', 40).notNullable().references('id').inTable('accounts');
    t.bigInteger('created_at').notNullable();
    t.string('action', 64).notNullable();
    t.string('client_ip', 64).nullable();
    t.string('user_agent', 512).nullable();
    t.string('session_id', 40).nullable();
    t.string('token_id', 40).nullable();
    t.index(['account_id', 'created_at', 'id'], 'security_log_account_created');
    t.index(['created_at'], 'security_log_created');
  });
  await knex.schema.alterTable('sessions', (t) => {
    t.bigInteger('reauthenticated_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('sessions', (t) => {
    t.dropColumn('reauthenticated_at');
  });
  await knex.schema.dropTable('security_log');
}
