import type { Knex } from 'knex';
import type { DeliveryStatus } from './retry-schedule';

/**
 * The columns every kind's delivery row has for the engine: its state, its attempt count since
 * the start and since the last redelivery, when it is due, and who holds it until when.
 */
export interface DeliveryState {
  status: DeliveryStatus;
  attempts: number;
  round_base: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  updated_at: number;
}

/** A new delivery: due now, with a fresh attempt budget, held by nobody. */
export function pendingState(now: number): DeliveryState {
  return { status: 'pending', attempts: 0, round_base: 0, next_attempt_at: now, lease_owner: null, lease_until: null, updated_at: now };
}

/** Who claims, when, until when, and the round's budget of attempts. */
export interface ClaimTerms {
  owner: string;
  now: number;
  leaseUntil: number;
  maxAttempts: number;
}

/**
 * The UPDATE of a claim over due rows: one more attempt counted (a row whose round budget is used
 * up keeps its count: it is given up, not sent) and the lease, which is also when the row is due
 * again should this worker die.
 */
export function claimChanges(q: Knex, c: ClaimTerms) {
  return {
    attempts: q.raw('attempts + CASE WHEN attempts - round_base >= ? THEN 0 ELSE 1 END', [c.maxAttempts]),
    lease_owner: c.owner,
    lease_until: c.leaseUntil,
    next_attempt_at: c.leaseUntil,
    updated_at: c.now,
  };
}

/**
 * A row as `claimChanges` leaves it, from the row as the claim locked it: a claim that holds its
 * rows locked knows their new state without reading them back. The same rule as the UPDATE's.
 */
export function claimedState<R extends DeliveryState>(before: R, c: ClaimTerms): R {
  const exhausted = before.attempts - before.round_base >= c.maxAttempts;
  return {
    ...before,
    attempts: exhausted ? before.attempts : before.attempts + 1,
    lease_owner: c.owner,
    lease_until: c.leaseUntil,
    next_attempt_at: c.leaseUntil,
    updated_at: c.now,
  };
}
