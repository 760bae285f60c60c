import type { Harness } from '../helpers/harness';
import { answer, attemptsOf, deliveryHarness, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks, workerPool } from './helpers';

/**
 * The real schedule (docs/events.md, Retries): three attempts with pauses of 5 s and then 10 s (the
 * default WEBHOOK_RETRY_DELAYS_MS). The only test that measures time; it allows for the attempt's
 * own duration and timer jitter.
 */
let receiver: Receiver;
let h: Harness;
const workers = workerPool(() => h);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, { onEvents: () => workers.wake() }); // the default time-out and pauses
});
afterAll(async () => {
  await workers.stopAll();
  await h.close();
  await receiver.close();
});

test('a failing address gets three attempts: at once, after 5 s, after 10 s more', async () => {
  expect(h.config.webhookRetryDelaysMs).toEqual([5000, 10000]);
  expect(h.config.webhookTimeoutMs).toBe(20000);
  workers.start();
  const site = await h.newSite('schedule');
  await webhooks(h).setEndpoint(site.id, receiver.url('/schedule'), 'message.created');
  receiver.on('/schedule', answer(503));
  await h.visitorSay(site.id, 'v', 'hi');
  const [id] = await eventIdsOf(h, site.id, 'message.created');
  await waitFor('three attempts', async () => (await deliveryOf(h, id)).status === 'failed', 25_000);

  const arrivals = receiver.at('/schedule').map((r) => r.at);
  expect(arrivals).toHaveLength(3);
  const gaps = [arrivals[1] - arrivals[0], arrivals[2] - arrivals[1]];
  // As the receiver sees it: the pause plus the previous attempt's own duration and the scheduling
  // latency of a loaded 2-core CI machine (the whole suite runs beside this test).
  expect(gaps[0]).toBeGreaterThanOrEqual(5000 - 20);
  expect(gaps[0]).toBeLessThanOrEqual(5000 + 2500);
  expect(gaps[1]).toBeGreaterThanOrEqual(10000 - 20);
  expect(gaps[1]).toBeLessThanOrEqual(10000 + 2500);
  // As the log records it: each pause runs from the end of one attempt to the start of the next.
  const log = await attemptsOf(h, id);
  expect(log.map((a) => a.attempt)).toEqual([1, 2, 3]);
  const pauses = [1, 2].map((i) => Number(log[i].started_at) - (Number(log[i - 1].started_at) + Number(log[i - 1].duration_ms)));
  expect(pauses[0]).toBeGreaterThanOrEqual(5000);
  expect(pauses[0]).toBeLessThanOrEqual(5000 + 2000);
  expect(pauses[1]).toBeGreaterThanOrEqual(10000);
  expect(pauses[1]).toBeLessThanOrEqual(10000 + 2000);
  process.stdout.write(`measured pauses: ${gaps.join(' ms, ')} ms\n`);
}, 40_000);
