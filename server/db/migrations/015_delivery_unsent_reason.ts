import type { Knex } from 'knex';

/**
 * `deliveries.unsent_reason`: why a delivery ended failed without sending in its last round (its
 * address was disabled, its event or address removed). Such an end leaves no row in the attempt
 * log, so the delivery itself says why; null whenever the delivery sent, or is pending.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deliveries', (t) => {
    t.string('unsent_reason', 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deliveries', (t) => t.dropColumn('unsent_reason'));
}
