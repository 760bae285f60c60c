import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * "Seen" (issue 25, item 4): the newest agent reply the chat window has shown its visitor, one row
 * a conversation, owned by server/window/seen-store.ts. It only moves forward, by the reply's
 * (`message_created_at`, `message_id`) order; `seen_at` is when the window said so. Typing, the
 * other half of the item, is never stored.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('conversation_seen', (t) => {
    binaryText(knex, t);
    t.string('conversation_id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('message_id', 40).notNullable();
    t.bigInteger('message_created_at').notNullable();
    t.bigInteger('seen_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('conversation_seen');
}
