import type { Knex } from 'knex';

/**
 * Who issued each access key: the account that made it through the management API, or null for a
 * key the operator CLI made (and for every key issued before this column existed). No foreign key:
 * the key keeps naming its creator after the account is gone, as the audit log does.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.string('created_by', 40).nullable();
  });
  // Listing a site's keys pages by (created_at, id); the index lets each page start where the last ended.
  await knex.schema.alterTable('api_keys', (t) => {
    t.index(['site_id', 'created_at', 'id'], 'api_keys_site_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropIndex(['site_id', 'created_at', 'id'], 'api_keys_site_created');
  });
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('created_by');
  });
}
