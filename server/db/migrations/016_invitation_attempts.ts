import type { Knex } from 'knex';

/**
 * Invitations as probes (issue 24):
 * - `invitations.attempts`: acceptances tried with a password, taken before the password is checked;
 *   at the limit (invitations.ts) the invitation is dead, so one invitation answers a bounded number
 *   of guesses however many are sent at once.
 * - `accounts.email_verified_at`: when the account's control of its mailbox was established, null
 *   while nobody has. An account made through an invitation starts null: anyone may invite any
 *   email, so the person who accepted proved only that they held the link. The accounts that exist
 *   are marked verified as of their creation: they were made by the operator (the CLI or the setup
 *   link, who vouches for the address) or accepted before this mark existed, and once a used
 *   invitation is purged nothing tells the two apart; marking every one unverified would flag whole
 *   teams with no way to clear it until email verification exists (issue 26).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invitations', (t) => {
    t.integer('attempts').notNullable().defaultTo(0);
  });
  await knex.schema.alterTable('accounts', (t) => {
    t.bigInteger('email_verified_at').nullable();
  });
  await knex('accounts').update({ email_verified_at: knex.ref('created_at') });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('accounts', (t) => {
    t.dropColumn('email_verified_at');
  });
  await knex.schema.alterTable('invitations', (t) => {
    t.dropColumn('attempts');
  });
}
