import type { Knex } from 'knex';
import { binaryText, deliveryStateColumns } from './columns';

/**
 * Agents told of waiting visitors (docs/email.md): each member's choice per site (no row: the
 * default, every conversation after 5 minutes), when each member was last emailed of each
 * conversation (the 15-minute period), and one scheduled check per conversation whose visitor waits,
 * claimed by the delivery engine like an email. New tables only: the previous release never reads them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('member_alert_settings', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable();
    t.string('account_id', 40).notNullable();
    t.string('mode', 16).notNullable(); // all | assigned | none
    t.integer('wait_minutes').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['site_id', 'account_id']);
  });
  await knex.schema.createTable('agent_alerts_sent', (t) => {
    binaryText(knex, t);
    t.string('conversation_id', 40).notNullable();
    t.string('account_id', 40).notNullable();
    t.string('site_id', 40).notNullable();
    t.bigInteger('sent_at').notNullable();
    t.primary(['conversation_id', 'account_id']);
    t.index(['sent_at'], 'agent_alerts_sent_at');
  });
  await knex.schema.createTable('agent_alert_checks', (t) => {
    binaryText(knex, t);
    t.string('conversation_id', 40).primary();
    t.string('site_id', 40).notNullable();
    deliveryStateColumns(t, 'agent_alert_checks_due');
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('agent_alert_checks');
  await knex.schema.dropTable('agent_alerts_sent');
  await knex.schema.dropTable('member_alert_settings');
}
