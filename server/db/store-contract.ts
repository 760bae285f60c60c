import type { Knex } from 'knex';

/**
 * The contract a feature's service relies on, taken from its store's implementation: every method
 * with the same parameters, answering a promise of what the query resolves to. A store's Knex
 * queries resolve like promises but are query builders; this is what the service may count on, and
 * what the tests' in-memory fakes (test/fakes/) implement, so a change to a store's methods fails
 * type-checking in its fake instead of drifting silently. A store's database handle (for a
 * change that other stores join in one transaction) stays what it is.
 */
export type StoreContract<Impl> = {
  [K in keyof Impl]: Impl[K] extends Knex ? Impl[K] : Impl[K] extends (...args: infer A) => infer R ? (...args: A) => PromiseLike<Awaited<R>> : Impl[K];
};
