import type { Knex } from 'knex';

/**
 * The lease token of an Idempotency-Key record: a fresh random value for every request that runs
 * under the key (the first, or one that took an abandoned key over). Recording the answer is fenced
 * on it, so a request whose lease was taken over can no longer commit. Rows from before this
 * migration have none and match no request's token: their request, if still running, is fenced out.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.string('lease_token', 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.dropColumn('lease_token');
  });
}
