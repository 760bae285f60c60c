import { MAIL_RETRY_DELAYS_MS, mailOutcomeOf, mailRetryPolicy } from '../../server/mail/retry-schedule';

/** The mail retry schedule as a table (DECISIONS.md, Email): no database, no relay, the clock passed in. */
const T = 1_700_000_000_000;
const MIN = 60_000;
const policy = mailRetryPolicy();
const taken = { ok: true, responseCode: null, error: null };
const refused = (code: number | null, error = 'no') => ({ ok: false, responseCode: code, error });

test('retries after 1 min, 5 min, 30 min, 2 h and 6 h, then failed', () => {
  expect(MAIL_RETRY_DELAYS_MS).toEqual([MIN, 5 * MIN, 30 * MIN, 120 * MIN, 360 * MIN]);
  expect(policy.maxAttempts).toBe(6);
  const noAnswer = refused(null, 'connect ECONNREFUSED');
  const due = [1, 2, 3, 4, 5].map((attempt) => policy.decide(noAnswer, attempt, T));
  expect(due.map((d) => [d.outcome, d.status, d.nextAttemptAt - T])).toEqual([
    ['retry', 'pending', MIN],
    ['retry', 'pending', 5 * MIN],
    ['retry', 'pending', 30 * MIN],
    ['retry', 'pending', 120 * MIN],
    ['retry', 'pending', 360 * MIN],
  ]);
  expect(policy.decide(noAnswer, 6, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
});

test.each([
  [taken, 'delivered'],
  [refused(null), 'retry'], // no reply: time-out, refused, reset
  [refused(421), 'retry'], // service not available
  [refused(450), 'retry'], // mailbox busy
  [refused(452), 'retry'], // storage
  [refused(535), 'retry'], // our credentials: the operator fixes them
  [refused(530), 'retry'],
  [refused(550), 'failed'], // no such mailbox
  [refused(553), 'failed'],
  [refused(554), 'failed'],
] as const)('%j is %s', (result, outcome) => {
  expect(mailOutcomeOf(result)).toBe(outcome);
});

test('an email taken on any attempt is sent at once; one refused for good is never retried', () => {
  expect(policy.decide(taken, 6, T)).toEqual({ outcome: 'delivered', status: 'delivered', nextAttemptAt: T });
  expect(policy.decide(refused(550), 1, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
});
