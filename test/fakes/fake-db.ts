import type { Knex } from 'knex';

/**
 * A stand-in for the database handle a service opens its transactions on, for unit tests whose
 * fake stores ignore the transaction they are given: `transaction(work)` runs the work at once with
 * a transaction object that is never completed. Nothing is rolled back on an error, so a test of a
 * failed change checks what the rule refused, not what a rollback undid.
 */
export function fakeDb(): Knex {
  const trx = { isCompleted: () => false };
  // `client` names no engine, so dialect-dependent options (an isolation level) read as SQLite's: none.
  const db = { client: { config: { client: 'fake' } }, transaction: async <T>(work: (t: typeof trx) => Promise<T>) => work(trx) };
  return db as unknown as Knex;
}

/** A database handle that fails any use: for services whose tested rules must not reach it. */
export const noDatabase = new Proxy(
  {},
  {
    get: () => {
      throw new Error('this unit test has no database');
    },
  },
) as Knex;

/** An outbox for unit tests of rules that never emit; any emit fails the test. */
export const noOutbox = {
  emit: () => {
    throw new Error('this unit test emits no events');
  },
};
