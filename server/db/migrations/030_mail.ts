import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * The mail queue and its log (docs/email.md): one row per email, written in the transaction of the
 * change that causes it and claimed by the delivery worker like an event delivery (lease, attempts,
 * next attempt). The template's values are kept sealed with a key of the master key only until the
 * email is sent or given up, since a link in them opens an account; the row that stays is the log
 * (recipient, template, status, attempts, last error) for 30 days.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('emails', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    // Null for an email of an account alone (a password reset): it belongs to no site's log.
    t.string('site_id', 40).nullable();
    t.string('recipient', 254).notNullable();
    t.string('template', 64).notNullable();
    t.text('values_sealed').nullable();
    t.string('message_id', 255).notNullable();
    t.string('status', 16).notNullable(); // pending | delivered | failed
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('round_base').notNullable().defaultTo(0);
    t.bigInteger('next_attempt_at').notNullable();
    t.string('lease_owner', 64).nullable();
    t.bigInteger('lease_until').nullable();
    t.string('last_error', 500).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['status', 'next_attempt_at'], 'emails_due');
    t.index(['site_id', 'created_at'], 'emails_site_log');
    t.index(['updated_at'], 'emails_updated');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('emails');
}
