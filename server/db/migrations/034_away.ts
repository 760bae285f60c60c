import type { Knex } from 'knex';
import { binaryText, deliveryStateColumns } from './columns';

/**
 * Visitors told of late replies (docs/window.md, "Away"; docs/email.md): a site's business hours
 * and away message; whether a visitor asked for replies by email (and unsubscribed); and one
 * pending notice per conversation whose agent replies wait to be emailed, claimed by the delivery
 * engine like an email. All new tables and nullable columns: the previous release ignores them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('site_business_hours', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).primary();
    t.string('time_zone', 64).notNullable();
    // The week as JSON: `{"mon": [["09:00","17:00"]], ...}` (see server/sites/business-hours.ts).
    t.text('week').notNullable();
    t.string('away_message', 1000).nullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.bigInteger('updated_at').notNullable();
  });
  await knex.schema.alterTable('visitors', (t) => {
    // When the visitor left its email in the window to be told of replies (its consent); null: never.
    t.bigInteger('reply_email_at').nullable();
    // When it unsubscribed with one click: no more reply emails, the email stays shown to agents.
    t.bigInteger('reply_email_unsubscribed_at').nullable();
  });
  await knex.schema.createTable('reply_notices', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    t.string('visitor_id', 128).notNullable();
    deliveryStateColumns(t, 'reply_notices_due');
    t.string('last_error', 500).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['conversation_id', 'status'], 'reply_notices_conversation');
    t.index(['updated_at'], 'reply_notices_updated');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('reply_notices');
  await knex.schema.alterTable('visitors', (t) => {
    t.dropColumn('reply_email_at');
    t.dropColumn('reply_email_unsubscribed_at');
  });
  await knex.schema.dropTable('site_business_hours');
}
