import type { Knex } from 'knex';

/**
 * Owners list a site's pending invitations newest first by (created_at, id); the index lets each
 * page start where the last ended instead of scanning every invitation the site ever sent.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invitations', (t) => {
    t.index(['site_id', 'created_at', 'id'], 'invitations_site_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invitations', (t) => {
    t.dropIndex(['site_id', 'created_at', 'id'], 'invitations_site_created');
  });
}
