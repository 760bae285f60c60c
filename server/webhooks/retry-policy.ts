import { retrySchedule, type AttemptOutcome } from '../delivery/retry-schedule';

export type { AttemptOutcome, RetryDecision } from '../delivery/retry-schedule';

/** What an attempt's HTTP answer (or failure to get one) says; `PostResult` of transport.ts fits it. */
export interface AttemptResult {
  status: number | null;
  error?: string | null;
}

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

/** The retry schedule of WEBHOOK_RETRY_DELAYS_MS over HTTP answers (retry-schedule.ts). */
export function retryPolicy(delaysMs: readonly number[]) {
  return retrySchedule(delaysMs, outcomeOf);
}

export type RetryPolicy = ReturnType<typeof retryPolicy>;
