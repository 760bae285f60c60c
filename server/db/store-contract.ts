/**
 * The contract a feature's service relies on, taken from its store's implementation: every method
 * with the same parameters, answering a promise of what the query resolves to. A store's Knex
 * queries resolve like promises but are query builders; this is what the service may count on, and
 * what the tests' in-memory fakes (test/fakes/) implement, so a change to a store's methods fails
 * type-checking in its fake instead of drifting silently.
 */
export type StoreContract<Impl> = {
  [K in keyof Impl]: Impl[K] extends (...args: infer A) => infer R ? (...args: A) => PromiseLike<Awaited<R>> : Impl[K];
};
