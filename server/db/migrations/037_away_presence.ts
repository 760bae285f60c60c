import type { Knex } from 'knex';

/**
 * Whether a site is away while no member has the inbox open (docs/window.md, "Away"): a site that
 * answers through the API (a CRM) has no member online and is never away for it. A column with a
 * default: the previous release's writes (which do not name it) keep today's behaviour, `true`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('site_business_hours', (t) => {
    t.boolean('away_when_no_agent_online').notNullable().defaultTo(true);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('site_business_hours', (t) => {
    t.dropColumn('away_when_no_agent_online');
  });
}
