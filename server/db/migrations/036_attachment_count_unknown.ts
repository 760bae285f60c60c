import type { Knex } from 'knex';
import { dialectOf } from '../dialect';

/**
 * Closes the rolling-upgrade gap of 005: code older than 005 inserts messages without
 * `attachment_count`, and the column's default 0 read as "no files" hid their attachments. From here
 * the column is nullable with no default, so such a row reads NULL, "not counted", and the read path
 * looks its files up (messages/store.ts `mayHaveAttachments`); every writer since 005 writes the count.
 * Then rows an older instance wrote with 0 since 005 are counted once; it runs after the ALTER, which
 * on MariaDB waits for transactions open on `messages`, so no old write falls between the two.
 *
 * SQLite keeps its default 0: changing it would rebuild the table (its foreign keys refuse that), and
 * the embedded database has one process, so old and new code never write it together.
 */
export async function up(knex: Knex): Promise<void> {
  if (dialectOf(knex) === 'mysql') {
    // MariaDB 10.4+ makes a column nullable in place without a table copy; MySQL 8 rebuilds online (LOCK=NONE).
    await knex.raw('alter table ?? modify ?? int null default null', ['messages', 'attachment_count']);
  }
  await recountUncounted(knex);
}

/** Counts the files of messages that carry some but say 0 (written by code older than 005). */
export async function recountUncounted(knex: Knex): Promise<number> {
  return knex('messages')
    .where('attachment_count', 0)
    .whereIn('id', knex('attachments').whereNotNull('message_id').select('message_id'))
    .update({ attachment_count: countOfFiles(knex) });
}

const countOfFiles = (knex: Knex) => knex.raw('(select count(*) from ?? where ?? = ??)', ['attachments', 'attachments.message_id', 'messages.id']);

export async function down(knex: Knex): Promise<void> {
  if (dialectOf(knex) === 'mysql') {
    await knex('messages')
      .whereNull('attachment_count')
      .update({ attachment_count: countOfFiles(knex) });
    await knex.raw('alter table ?? modify ?? int not null default 0', ['messages', 'attachment_count']);
  }
}
