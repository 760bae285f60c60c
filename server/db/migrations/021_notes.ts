import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Internal notes (issue 25, item 5; DECISIONS "The inbox in depth"): what members write to each
 * other in a conversation. A table of their own, owned by server/notes/store.ts, so that no reader
 * of visitor-facing messages (the `messages` table feeds the chat window, `/api/v1`, events and
 * unread counts) can reach a note by forgetting a filter.
 * - `content`: the note's whole text in one column (the search read model indexes it);
 * - `mentions`: the accounts its `@email`s named when written or last edited (JSON array of ids),
 *   so an edit notifies only members newly named;
 * - `(conversation_id, created_at, id)` serves a conversation's notes page by page and the
 *   timeline's window of time; removing a conversation's notes is a range of it too.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('notes', (t) => {
    binaryText(knex, t);
    t.string('id', 40).primary();
    t.string('site_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    t.string('author_id', 40).notNullable();
    t.text('content').notNullable();
    t.string('format', 16).notNullable();
    t.text('mentions').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('edited_at').nullable();
    t.index(['conversation_id', 'created_at', 'id'], 'notes_conversation_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('notes');
}
