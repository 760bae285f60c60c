/** A delivery's end states and the state of one still to be sent; the same for every kind. */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** What one attempt's result means, before the attempt budget is considered. */
export type AttemptOutcome = 'delivered' | 'failed' | 'retry';

/** The delivery's next state after one attempt. */
export interface RetryDecision {
  outcome: AttemptOutcome;
  status: DeliveryStatus;
  /** When the delivery is due again (a retry), or when it ended. */
  nextAttemptAt: number;
}

/**
 * A retry schedule, free of I/O: one first attempt plus one retry per delay, the n-th retry
 * `delaysMs[n-1]` after the attempt before it ended. `classify` is the kind's reading of a result
 * (an HTTP answer, an SMTP reply). `roundAttempt` counts attempts since the last redelivery (the
 * first is 1); `now` is when the attempt ended.
 */
export function retrySchedule<R>(delaysMs: readonly number[], classify: (result: R) => AttemptOutcome) {
  const maxAttempts = delaysMs.length + 1;
  return {
    maxAttempts,
    decide(result: R, roundAttempt: number, now: number): RetryDecision {
      let outcome = classify(result);
      if (outcome === 'retry' && roundAttempt >= maxAttempts) outcome = 'failed';
      if (outcome !== 'retry') return { outcome, status: outcome, nextAttemptAt: now };
      return { outcome, status: 'pending', nextAttemptAt: now + delaysMs[Math.min(roundAttempt - 1, delaysMs.length - 1)] };
    },
  };
}

export type RetrySchedule<R> = ReturnType<typeof retrySchedule<R>>;
