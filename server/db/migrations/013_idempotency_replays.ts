import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Idempotent replays: one row each time a request under a recorded Idempotency-Key was answered
 * with the stored answer, for the conversation's timeline (server/webhooks/timeline.ts). The key
 * itself is client-chosen and may carry anything: only the first 16 hex digits of its SHA-256 (the
 * prefix of `idempotency_keys.key_hash`) are kept. Rows go with their key's record: purged by
 * `key_created_at`, the record's own creation time, with the same 24 hours.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('idempotency_replays', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    // The message of the replayed answer; null when the stored answer was an error.
    t.string('message_id', 40).nullable();
    t.integer('status').notNullable();
    // Whose key it was: an API key (public API) or a member (the management API's inbox).
    t.string('api_key_id', 40).nullable();
    t.string('account_id', 40).nullable();
    t.string('key_fingerprint', 16).notNullable();
    t.bigInteger('key_created_at').notNullable();
    t.bigInteger('replayed_at').notNullable();
    // With `id` last: the timeline's order (time, then id) read from the index on both engines.
    t.index(['conversation_id', 'replayed_at', 'id'], 'idempotency_replays_conversation');
    t.index(['key_created_at'], 'idempotency_replays_key_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('idempotency_replays');
}
