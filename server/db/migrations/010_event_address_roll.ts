import type { Knex } from 'knex';

/**
 * What the management API's event address features keep:
 * - `webhook_endpoints`: a planned roll's next secret (sealed like the current one) and its switch
 *   time; whether the address is disabled, why and since when; and the failure streak the
 *   automatic disabling reads (failed deliveries since the last success, and when that run began);
 * - `events.conversation_id` and `events.message_id`: what an event is about, so a conversation's
 *   timeline finds its events by index (events written before this migration have neither);
 * - `deliveries.test`: a signed test delivery, which recovery, redelivery and the failure streak skip;
 * - `delivery_attempts.request_headers`: the headers an attempt sent (JSON; never the secret).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.text('secret_next_encrypted').nullable();
    t.bigInteger('secret_switch_at').nullable();
    t.bigInteger('disabled_at').nullable();
    t.string('disabled_reason', 32).nullable(); // owner | failing
    t.bigInteger('failing_since').nullable();
    t.integer('failure_streak').notNullable().defaultTo(0);
  });
  await knex.schema.alterTable('events', (t) => {
    t.string('conversation_id', 40).nullable();
    t.string('message_id', 40).nullable();
    t.index(['conversation_id', 'created_at'], 'events_conversation_created');
    t.index(['site_id', 'name', 'created_at'], 'events_site_name_created');
  });
  await knex.schema.alterTable('deliveries', (t) => {
    t.boolean('test').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('delivery_attempts', (t) => {
    t.text('request_headers').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('delivery_attempts', (t) => t.dropColumn('request_headers'));
  await knex.schema.alterTable('deliveries', (t) => t.dropColumn('test'));
  await knex.schema.alterTable('events', (t) => {
    t.dropIndex(['site_id', 'name', 'created_at'], 'events_site_name_created');
    t.dropIndex(['conversation_id', 'created_at'], 'events_conversation_created');
    t.dropColumn('message_id');
    t.dropColumn('conversation_id');
  });
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    for (const c of ['failure_streak', 'failing_since', 'disabled_reason', 'disabled_at', 'secret_switch_at', 'secret_next_encrypted']) t.dropColumn(c);
  });
}
