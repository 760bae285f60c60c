import { outcomeOf, retryPolicy } from '../../server/webhooks/retry-policy';

/** The retry policy as a table: every status class, failures without an answer, and the last attempt. No database. */
const DELAYS = [60_000, 300_000];
const policy = retryPolicy(DELAYS);
const T = 1_700_000_000_000;
const answer = (status: number) => ({ status, error: null });
const failure = (error: string) => ({ status: null, error });

test('three attempts: the first and one per delay', () => {
  expect(policy.maxAttempts).toBe(3);
  expect(retryPolicy([1, 2, 3, 4]).maxAttempts).toBe(5);
});

test.each([
  [200, 'delivered'],
  [204, 'delivered'],
  [299, 'delivered'],
  [301, 'failed'],
  [302, 'failed'],
  [308, 'failed'],
  [400, 'failed'],
  [401, 'failed'],
  [404, 'failed'],
  [410, 'failed'],
  [429, 'failed'],
  [499, 'failed'],
  [500, 'retry'],
  [502, 'retry'],
  [503, 'retry'],
  [599, 'retry'],
  [100, 'retry'],
])('HTTP %i is %s', (status, outcome) => {
  expect(outcomeOf(answer(status))).toBe(outcome);
});

test.each([['timeout'], ['connection refused'], ['connection reset'], ['tls: certificate'], ['dns: not found']])('no answer (%s) is retried', (error) => {
  expect(outcomeOf(failure(error))).toBe('retry');
});

test('an address refused by policy is not retried', () => {
  expect(outcomeOf(failure('blocked address'))).toBe('failed');
});

test('a retry is due after the delay of its place in the round; the next state ends at once otherwise', () => {
  expect(policy.decide(answer(503), 1, T)).toEqual({ outcome: 'retry', status: 'pending', nextAttemptAt: T + 60_000 });
  expect(policy.decide(failure('timeout'), 2, T)).toEqual({ outcome: 'retry', status: 'pending', nextAttemptAt: T + 300_000 });
  expect(policy.decide(answer(200), 1, T)).toEqual({ outcome: 'delivered', status: 'delivered', nextAttemptAt: T });
  expect(policy.decide(answer(404), 1, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
  expect(policy.decide(answer(302), 2, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
});

test('the last attempt of a round is not retried, whatever the failure; a success still counts', () => {
  expect(policy.decide(answer(500), 3, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
  expect(policy.decide(failure('timeout'), 3, T)).toEqual({ outcome: 'failed', status: 'failed', nextAttemptAt: T });
  expect(policy.decide(failure('connection reset'), 4, T)).toMatchObject({ outcome: 'failed' });
  expect(policy.decide(answer(200), 3, T)).toMatchObject({ outcome: 'delivered' });
});

test('with one delay, the only retry waits that delay', () => {
  const one = retryPolicy([100]);
  expect(one.decide(answer(500), 1, T)).toEqual({ outcome: 'retry', status: 'pending', nextAttemptAt: T + 100 });
  expect(one.decide(answer(500), 2, T)).toMatchObject({ outcome: 'failed' });
});
