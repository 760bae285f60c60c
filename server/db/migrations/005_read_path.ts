import type { Knex } from 'knex';

/**
 * The read path (issue 8):
 *
 * - `messages.attachment_count`, written in the message's own insert transaction: a page of
 *   messages asks for attachments only when one of its messages has any (most have none). Existing
 *   rows are counted once here.
 * - The conversation list's indexes carry `updated_at` after the keyset columns. The list is always
 *   ordered by (created_at, id), so no index can serve a range on updated_at and that order at once:
 *   the list walks the keyset range in order and tests updatedAfter / updatedBefore on the way. With
 *   updated_at in the index SQLite tests it on the index entry before it reads the row (MariaDB 10.11
 *   reads the row: it pushes no condition down into the backward scans the list uses). They replace
 *   the two indexes of 001_core.ts, whose columns they start with.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('messages', (t) => {
    t.integer('attachment_count').notNullable().defaultTo(0);
  });
  await knex('messages')
    .whereIn('id', knex('attachments').whereNotNull('message_id').select('message_id'))
    .update({ attachment_count: knex.raw('(select count(*) from ?? where ?? = ??)', ['attachments', 'attachments.message_id', 'messages.id']) });

  // New indexes first: on MySQL the foreign key on site_id always has an index to use.
  await knex.schema.alterTable('conversations', (t) => {
    t.index(['site_id', 'created_at', 'id', 'updated_at'], 'conversations_site_created_updated');
    t.index(['site_id', 'state', 'created_at', 'id', 'updated_at'], 'conversations_site_state_created_updated');
  });
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['site_id', 'created_at', 'id'], 'conversations_site_created');
    t.dropIndex(['site_id', 'state', 'created_at', 'id'], 'conversations_site_state_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.index(['site_id', 'created_at', 'id'], 'conversations_site_created');
    t.index(['site_id', 'state', 'created_at', 'id'], 'conversations_site_state_created');
  });
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['site_id', 'created_at', 'id', 'updated_at'], 'conversations_site_created_updated');
    t.dropIndex(['site_id', 'state', 'created_at', 'id', 'updated_at'], 'conversations_site_state_created_updated');
  });
  // Plain ALTER TABLE ... DROP COLUMN (MariaDB, and SQLite since 3.35): knex's own dropColumn
  // rebuilds the table on SQLite, which the foreign keys from attachments refuse.
  await knex.raw('alter table ?? drop column ??', ['messages', 'attachment_count']);
}
