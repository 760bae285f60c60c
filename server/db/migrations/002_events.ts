import type { Knex } from 'knex';
import { binaryText } from './columns';

export async function up(knex: Knex): Promise<void> {
  // One event address per site, with its subscribed events and its encrypted signing secret.
  await knex.schema.createTable('webhook_endpoints', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable().unique().references('id').inTable('sites');
    t.string('url', 2048).notNullable();
    t.string('events', 200).notNullable(); // comma-separated event names
    t.text('secret_encrypted').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });

  // The outbox: written in the same transaction as the change it describes. `body` holds the
  // exact bytes sent on every attempt.
  await knex.schema.createTable('events', (t) => {
    binaryText(knex, t);
    t.string('id', 80).primary();
    t.string('site_id', 40).notNullable();
    t.string('name', 40).notNullable();
    t.text('body', 'mediumtext').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['site_id', 'created_at']);
    t.index(['created_at']); // the 30-day cleanup
  });

  // Delivery state of one event to the site's address. Workers claim rows with a lease.
  await knex.schema.createTable('deliveries', (t) => {
    binaryText(knex, t);
    t.string('event_id', 80).primary().references('id').inTable('events');
    t.string('site_id', 40).notNullable();
    t.string('endpoint_id', 40).notNullable();
    t.string('status', 16).notNullable(); // pending | delivered | failed
    // `attempts` numbers every attempt ever made (it continues across redeliveries); the attempts
    // of the current round are `attempts - round_base`, so a redelivery gets a fresh budget.
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('round_base').notNullable().defaultTo(0);
    // Due when pending and next_attempt_at has passed. A claim moves next_attempt_at to the end of
    // its lease, so a row whose worker died becomes due again by itself when the lease runs out.
    t.bigInteger('next_attempt_at').notNullable();
    t.string('lease_owner', 64).nullable();
    t.bigInteger('lease_until').nullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['status', 'next_attempt_at'], 'deliveries_due');
    t.index(['site_id', 'status', 'updated_at'], 'deliveries_site_status');
    t.index(['status', 'updated_at'], 'deliveries_finished'); // the 30-day cleanup
  });

  // The delivery log: one row per attempt, kept 30 days.
  await knex.schema.createTable('delivery_attempts', (t) => {
    binaryText(knex, t);
    t.increments('id').primary();
    t.string('event_id', 80).notNullable();
    t.string('site_id', 40).notNullable();
    t.string('endpoint_id', 40).notNullable();
    t.string('event_name', 40).notNullable();
    t.integer('attempt').notNullable();
    t.string('url', 2048).notNullable();
    t.bigInteger('started_at').notNullable();
    t.integer('duration_ms').notNullable();
    t.integer('status_code').nullable();
    t.string('error', 500).nullable();
    t.text('response_excerpt').nullable();
    t.index(['site_id', 'started_at']);
    t.index(['event_id', 'attempt']);
    t.index(['started_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['delivery_attempts', 'deliveries', 'events', 'webhook_endpoints']) {
    await knex.schema.dropTableIfExists(table);
  }
}
