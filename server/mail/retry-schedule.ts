import { retrySchedule, type AttemptOutcome } from '../delivery/retry-schedule';
import type { MailResult } from './transport';

const MINUTE = 60_000;
/** DECISIONS.md, Email: retries 1 min, 5 min, 30 min, 2 h and 6 h after the attempt before, then failed. */
export const MAIL_RETRY_DELAYS_MS = [MINUTE, 5 * MINUTE, 30 * MINUTE, 120 * MINUTE, 360 * MINUTE];

/** SMTP replies about our own sign-in: the operator fixes the credentials, so the email waits for that. */
const AUTH_CODES = new Set([530, 534, 535, 538]);

/**
 * What one attempt's SMTP reply means: taken; refused for good (a 5xx about the recipient or the
 * message: trying again changes nothing); or worth another try (no reply, a 4xx, a sign-in failure).
 */
export function mailOutcomeOf(result: MailResult): AttemptOutcome {
  if (result.ok) return 'delivered';
  if (result.responseCode !== null && result.responseCode >= 500 && !AUTH_CODES.has(result.responseCode)) return 'failed';
  return 'retry';
}

/** The mail retry schedule (pure: the engine passes the clock in `decide`'s `now`). */
export function mailRetryPolicy(delaysMs: readonly number[] = MAIL_RETRY_DELAYS_MS) {
  return retrySchedule(delaysMs, mailOutcomeOf);
}
