import type { Knex } from 'knex';
import { binaryText } from './columns';

/**
 * Visitor files under control:
 * - `site_visitor_files`, one row per site (none: files on, any type, nothing stored): whether the
 *   site takes files from its visitors and of which types, and the counters its quotas are checked
 *   against, changed in the transaction that stores or removes the files (bytes stored, bytes of
 *   the current UTC day). Existing visitor files are counted once here.
 * - an index on `attachments.created_at` for the retention sweep (oldest first, in batches).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('site_visitor_files', (t) => {
    binaryText(knex, t);
    t.string('site_id', 40).primary().references('id').inTable('sites');
    t.boolean('files_enabled').notNullable().defaultTo(true);
    t.string('allowed_types', 2100).nullable(); // comma-separated MIME patterns; null: any type
    t.bigInteger('stored_bytes').notNullable().defaultTo(0);
    t.integer('usage_day').notNullable().defaultTo(0); // days since 1970-01-01 UTC
    t.bigInteger('day_bytes').notNullable().defaultTo(0);
    t.bigInteger('updated_at').notNullable();
  });
  const stored: { site_id: string; bytes: number | string }[] = await knex('attachments')
    .join('messages', 'messages.id', 'attachments.message_id')
    .where('messages.direction', 'incoming')
    .groupBy('attachments.site_id')
    .select('attachments.site_id', knex.raw('sum(attachments.size) as bytes'));
  const at = Date.now();
  for (let i = 0; i < stored.length; i += 500) {
    await knex('site_visitor_files').insert(
      stored.slice(i, i + 500).map((s) => ({
        site_id: s.site_id,
        files_enabled: true,
        allowed_types: null,
        stored_bytes: Number(s.bytes),
        usage_day: 0,
        day_bytes: 0,
        updated_at: at,
      })),
    );
  }
  await knex.schema.alterTable('attachments', (t) => {
    t.index(['created_at', 'id'], 'attachments_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('attachments', (t) => {
    t.dropIndex(['created_at', 'id'], 'attachments_created');
  });
  await knex.schema.dropTableIfExists('site_visitor_files');
}
