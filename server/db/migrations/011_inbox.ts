import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * The inbox of the management API:
 * - `messages.author_id`: the account that wrote a dashboard reply (null for every other origin);
 * - `conversations.assignee_id`: the member a conversation is assigned to, with an index led by
 *   (site, assignee) that serves the inbox's `assignee=me|unassigned` filter as a keyset range in
 *   (created_at, id) order, like the public list's indexes (005_read_path.ts);
 * - `inbox_reads`: each member's read mark per conversation (the newest message read and its time);
 * - `inbox_positions` and `inbox_activity`: a site's inbox feed, one row per change the inbox
 *   shows live (public events and the private ones: assignments, read marks), numbered per site
 *   under a lock on the site's counter row, so positions commit in order and `Last-Event-ID`
 *   resumes without gaps.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('messages', (t) => {
    t.string('author_id', 40).nullable();
  });
  await knex.schema.alterTable('conversations', (t) => {
    t.string('assignee_id', 40).nullable();
  });
  await knex.schema.alterTable('conversations', (t) => {
    t.index(['site_id', 'assignee_id', 'created_at', 'id', 'updated_at'], 'conversations_site_assignee_created');
  });

  await knex.schema.createTable('inbox_reads', (t) => {
    binaryText(knex, t);
    t.string('account_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    t.string('site_id', 40).notNullable();
    t.bigInteger('last_read_at').notNullable();
    t.string('last_read_message_id', 40).nullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['account_id', 'conversation_id']);
  });

  await knex.schema.createTable('inbox_positions', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).primary();
    t.bigInteger('position').notNullable();
  });

  await knex.schema.createTable('inbox_activity', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).notNullable();
    t.bigInteger('position').notNullable();
    t.string('kind', 32).notNullable();
    t.string('conversation_id', 40).notNullable();
    // The public event it mirrors (its body is read from `events`), or null for a private change.
    t.string('event_id', 80).nullable();
    // Whose read mark it is (read marks are shown to their own member only).
    t.string('account_id', 40).nullable();
    t.text('body').nullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['site_id', 'position']);
    t.index(['created_at'], 'inbox_activity_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('inbox_activity');
  await knex.schema.dropTableIfExists('inbox_positions');
  await knex.schema.dropTableIfExists('inbox_reads');
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['site_id', 'assignee_id', 'created_at', 'id', 'updated_at'], 'conversations_site_assignee_created');
  });
  await knex.raw('alter table ?? drop column ??', ['conversations', 'assignee_id']);
  await knex.raw('alter table ?? drop column ??', ['messages', 'author_id']);
}
