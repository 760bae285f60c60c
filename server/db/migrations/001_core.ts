import type { Knex } from 'knex';
import { binaryText } from './columns';

// Times are BIGINT milliseconds since the epoch (see platform/time.ts).
// Every list query is a keyset range scan on one of the composite indexes below.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sites', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('name', 200).notNullable();
    t.bigInteger('created_at').notNullable();
  });

  await knex.schema.createTable('api_keys', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('fingerprint', 64).notNullable().unique(); // SHA-256 hex of the whole key
    t.string('display_prefix', 16).notNullable();
    t.string('scopes', 200).notNullable(); // comma-separated rights
    t.string('label', 200).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.bigInteger('last_used_at').nullable();
    t.index(['site_id', 'created_at']);
  });

  await knex.schema.createTable('conversations', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable().references('id').inTable('sites');
    t.string('visitor_id', 128).notNullable();
    t.string('state', 16).notNullable();
    // 1 while open, NULL once closed: the unique index below admits one open conversation per
    // visitor, so simultaneous first messages cannot start two conversations.
    t.tinyint('open_marker').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('last_message_at').nullable();
    t.bigInteger('closed_at').nullable();
    t.unique(['site_id', 'visitor_id', 'open_marker'], { indexName: 'conversations_one_open_per_visitor' });
    t.index(['site_id', 'created_at', 'id'], 'conversations_site_created');
    t.index(['site_id', 'state', 'created_at', 'id'], 'conversations_site_state_created');
  });

  await knex.schema.createTable('messages', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('conversation_id', 40).notNullable().references('id').inTable('conversations');
    t.string('site_id', 40).notNullable();
    t.string('direction', 16).notNullable();
    t.string('origin', 16).notNullable();
    t.string('api_key_id', 40).nullable();
    t.text('content', 'mediumtext').notNullable();
    t.string('format', 16).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['conversation_id', 'created_at', 'id'], 'messages_conversation_created');
  });

  await knex.schema.createTable('attachments', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('message_id', 40).nullable().references('id').inTable('messages');
    t.string('name', 255).notNullable();
    t.string('mime_type', 255).notNullable();
    t.bigInteger('size').notNullable();
    t.string('sha256', 64).notNullable();
    t.string('storage_key', 255).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['message_id']);
  });

  await knex.schema.createTable('idempotency_keys', (t) => {
    binaryText(knex, t);
    t.string('api_key_id', 40).notNullable();
    t.string('key_hash', 64).notNullable(); // SHA-256 of the Idempotency-Key value
    t.string('request_hash', 64).notNullable();
    t.string('state', 16).notNullable(); // running | done
    t.integer('response_status').nullable();
    t.text('response_body', 'mediumtext').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('locked_until').notNullable();
    t.primary(['api_key_id', 'key_hash']);
    t.index(['created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['idempotency_keys', 'attachments', 'messages', 'conversations', 'api_keys', 'sites']) {
    await knex.schema.dropTableIfExists(table);
  }
}
