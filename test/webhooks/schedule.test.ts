import type { Harness } from '../helpers/harness';
import { retriesByTimerOnly } from '../helpers/retry-timer';
import { answer, attemptsOf, deliveryHarness, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks, workerPool } from './helpers';

/**
 * The real schedule (docs/events.md, Retries): three attempts with pauses of 5 s and then 10 s (the
 * default WEBHOOK_RETRY_DELAYS_MS). The pauses decided are checked exactly; that the retries came
 * on time is told by how they came (the worker's own retry timer, with its poll an hour apart), and
 * the pauses seen are bounded from below only: a busy machine makes them longer, never shorter.
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
  const byTimer = retriesByTimerOnly(h.runtime.services);
  workers.start({}, byTimer.options);
  const site = await h.newSite('schedule');
  await webhooks(h).setEndpoint(site.id, receiver.url('/schedule'), 'message.created');
  receiver.on('/schedule', answer(503));
  await h.visitorSay(site.id, 'v', 'hi');
  const [id] = await eventIdsOf(h, site.id, 'message.created');
  // A liveness bound: the 15 s of pauses and room to spare on a busy machine; the worker's next poll is
  // an hour away, so only its retry timer can have brought the retries by then.
  await waitFor('three attempts', async () => (await deliveryOf(h, id)).status === 'failed', 60_000);
  expect(byTimer.decided.filter((d) => d.eventId === id).map((d) => [d.attempt, d.status, d.pauseMs])).toEqual([
    [1, 'pending', 5000],
    [2, 'pending', 10000],
    [3, 'failed', 0],
  ]);

  const arrivals = receiver.at('/schedule').map((r) => r.at);
  expect(arrivals).toHaveLength(3);
  const gaps = [arrivals[1] - arrivals[0], arrivals[2] - arrivals[1]];
  // As the receiver sees it: the pause plus the previous attempt's own duration (timers never fire early).
  expect(gaps[0]).toBeGreaterThanOrEqual(5000 - 20);
  expect(gaps[1]).toBeGreaterThanOrEqual(10000 - 20);
  // As the log records it: each pause runs from the end of one attempt to the start of the next.
  const log = await attemptsOf(h, id);
  expect(log.map((a) => a.attempt)).toEqual([1, 2, 3]);
  const pauses = [1, 2].map((i) => Number(log[i].started_at) - (Number(log[i - 1].started_at) + Number(log[i - 1].duration_ms)));
  expect(pauses[0]).toBeGreaterThanOrEqual(5000);
  expect(pauses[1]).toBeGreaterThanOrEqual(10000);
  process.stdout.write(`measured pauses: ${gaps.join(' ms, ')} ms\n`);
}, 90_000);
