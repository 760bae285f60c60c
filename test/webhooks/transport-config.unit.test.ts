/** Issue 8, delivery: the worker's concurrency and per-address cap are settings, checked at start. */
import { loadConfig } from '../../server/config';

const load = (env: Record<string, string>) => loadConfig(env as NodeJS.ProcessEnv);

test('defaults: 16 deliveries in flight, at most 4 to one address', () => {
  expect(load({})).toMatchObject({ webhookConcurrency: 16, webhookMaxInFlightPerAddress: 4 });
});

test('both can be set', () => {
  expect(load({ WEBHOOK_CONCURRENCY: '64', WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS: '32' })).toMatchObject({
    webhookConcurrency: 64,
    webhookMaxInFlightPerAddress: 32,
  });
});

test.each([
  [{ WEBHOOK_CONCURRENCY: '0' }, /WEBHOOK_CONCURRENCY must be at least 1/],
  [{ WEBHOOK_CONCURRENCY: 'many' }, /WEBHOOK_CONCURRENCY must be a non-negative integer/],
  [{ WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS: '0' }, /WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS must be at least 1/],
  [{ WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS: '2.5' }, /WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS must be a non-negative integer/],
  [{ WEBHOOK_CONCURRENCY: '8', WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS: '9' }, /must not exceed WEBHOOK_CONCURRENCY/],
])('%j is refused at start', (env, message) => {
  expect(() => load(env)).toThrow(message);
});
