import { claimedState, pendingState } from '../../server/delivery/rows';

/** The claim's UPDATE (claimChanges) and the state a claim hands over without reading it back follow one rule. */
const terms = { owner: 'w1', now: 1_000, leaseUntil: 61_000, maxAttempts: 3 };

test('a claim counts one more attempt and leases the row until it is due again', () => {
  const before = { ...pendingState(500), attempts: 1, round_base: 0, event_id: 'evt_1' };
  expect(claimedState(before, terms)).toEqual({ ...before, attempts: 2, lease_owner: 'w1', lease_until: 61_000, next_attempt_at: 61_000, updated_at: 1_000 });
});

test('a row whose round used up its budget keeps its count (it is given up, not sent), and counts from its round', () => {
  const spent = { ...pendingState(500), attempts: 5, round_base: 2 };
  expect(claimedState(spent, terms).attempts).toBe(5);
  // A redelivery started a round at 2: two attempts into it, one is left.
  expect(claimedState({ ...spent, attempts: 4 }, terms).attempts).toBe(5);
});
