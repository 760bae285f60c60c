import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * People who manage sites (the management API, /manage/v1):
 * - `accounts`: sign-in by email (stored normalised, so the unique index is case-insensitive on
 *   every engine) and a scrypt password hash;
 * - `memberships`: an account's role on one site (`owner` or `agent`);
 * - `sessions`: a browser's sign-in; only the SHA-256 of the cookie's token is kept;
 * - `management_tokens`: tokens for scripts (`wcm_...`), SHA-256 fingerprint only;
 * - `invitations`: single-use links to join a site, SHA-256 of the link's token only;
 * - `audit_log`: who did what on a site, kept one year.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('accounts', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('email', 254).notNullable().unique();
    t.string('password_hash', 255).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('password_changed_at').notNullable();
  });

  await knex.schema.createTable('memberships', (t) => {
    binaryText(knex, t);
    t.string('account_id', 40).notNullable().references('id').inTable('accounts');
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('role', 16).notNullable(); // owner | agent
    t.bigInteger('created_at').notNullable();
    t.primary(['account_id', 'site_id']);
    t.index(['site_id', 'created_at'], 'memberships_site_created');
  });

  await knex.schema.createTable('sessions', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('token_hash', 64).notNullable().unique();
    t.string('account_id', 40).notNullable().references('id').inTable('accounts');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('last_seen_at').notNullable();
    t.bigInteger('idle_expires_at').notNullable();
    t.bigInteger('expires_at').notNullable(); // absolute: created_at + 12 hours
    t.string('user_agent', 512).nullable();
    t.string('client_ip', 64).nullable();
    t.index(['account_id', 'created_at'], 'sessions_account_created');
    t.index(['idle_expires_at'], 'sessions_idle_expires');
  });

  await knex.schema.createTable('management_tokens', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('account_id', 40).notNullable().references('id').inTable('accounts');
    t.string('fingerprint', 64).notNullable().unique(); // SHA-256 hex of the whole token
    t.string('display_prefix', 16).notNullable();
    t.string('label', 200).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('last_used_at').nullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['account_id', 'created_at'], 'management_tokens_account_created');
  });

  await knex.schema.createTable('invitations', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('token_hash', 64).notNullable().unique();
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('role', 16).notNullable();
    t.string('email', 254).notNullable();
    t.string('created_by', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('accepted_at').nullable();
    t.string('accepted_by', 40).nullable();
    t.index(['expires_at'], 'invitations_expires');
  });

  await knex.schema.createTable('audit_log', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.string('actor_account_id', 40).nullable(); // null: the operator CLI
    t.string('actor_token_id', 40).nullable(); // set when a management token acted
    t.string('action', 64).notNullable();
    t.string('object_id', 64).nullable();
    t.string('client_ip', 64).nullable();
    t.index(['site_id', 'created_at', 'id'], 'audit_log_site_created');
    t.index(['created_at'], 'audit_log_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['audit_log', 'invitations', 'management_tokens', 'sessions', 'memberships', 'accounts']) {
    await knex.schema.dropTableIfExists(table);
  }
}
