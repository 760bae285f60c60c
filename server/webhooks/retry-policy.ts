import type { DeliveryStatus } from './store';

/** What an attempt's HTTP answer (or failure to get one) says; `PostResult` of transport.ts fits it. */
export interface AttemptResult {
  status: number | null;
  error?: string | null;
}

export type AttemptOutcome = 'delivered' | 'failed' | 'retry';

/** What an attempt's result means for the delivery, before the attempt budget is considered. */
export function outcomeOf(result: AttemptResult): AttemptOutcome {
  if (result.status !== null) {
    if (result.status >= 200 && result.status < 300) return 'delivered';
    if (result.status >= 300 && result.status < 500) return 'failed'; // 3xx is not followed; 4xx is the receiver's "no"
    return 'retry';
  }
  // The address is refused by policy; trying again changes nothing. Redelivery remains possible.
  if (result.error === 'blocked address') return 'failed';
  return 'retry'; // time-out, reset, refused, TLS, DNS: may pass next time
}

/** The delivery's next state after one attempt. */
export interface RetryDecision {
  outcome: AttemptOutcome;
  status: DeliveryStatus;
  /** When the delivery is due again (a retry), or when it ended. */
  nextAttemptAt: number;
}

/**
 * The retry schedule of WEBHOOK_RETRY_DELAYS_MS: one first attempt plus one retry per delay, the
 * n-th retry `delaysMs[n-1]` after the attempt before it ended. `roundAttempt` counts attempts
 * since the last redelivery (the first is 1); `now` is when the attempt ended.
 */
export function retryPolicy(delaysMs: readonly number[]) {
  const maxAttempts = delaysMs.length + 1;
  return {
    maxAttempts,
    decide(result: AttemptResult, roundAttempt: number, now: number): RetryDecision {
      let outcome = outcomeOf(result);
      if (outcome === 'retry' && roundAttempt >= maxAttempts) outcome = 'failed';
      if (outcome !== 'retry') return { outcome, status: outcome, nextAttemptAt: now };
      return { outcome, status: 'pending', nextAttemptAt: now + delaysMs[Math.min(roundAttempt - 1, delaysMs.length - 1)] };
    },
  };
}

export type RetryPolicy = ReturnType<typeof retryPolicy>;
