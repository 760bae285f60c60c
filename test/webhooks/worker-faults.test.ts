import type { ServerResponse } from 'node:http';
import pino from 'pino';
import { Harness } from '../helpers/harness';
import type { DeliveryWorker, WorkerOptions } from '../../server/webhooks/worker';
import { deliveryWorkerFor } from '../../server/services';
import { attemptsOf, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks, deliveryHarness } from './helpers';

/**
 * Attempts that outlive their lease (a database stall, a receiver that answers late). The lease
 * is 400 ms here and the receiver holds its answers until the test releases them, so every
 * interleaving below is forced, not hoped for. Runs on both engines: on SQLite two workers in one
 * process share the connection, which is enough for the claim and finish queries to meet.
 */
const LEASE_MS = 400;

let receiver: Receiver;
let h: Harness;
const running: DeliveryWorker[] = [];
/** Workers that the outbox wakes when the test writes an event (the harness calls this). */
const awake = new Set<DeliveryWorker>();

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, {
    timeoutMs: 20_000, // far longer than the lease: the attempt, not its time-out, outlives it
    delaysMs: [100, 100, 100],
    onEvents: () => awake.forEach((w) => w.wake()),
  });
});
afterEach(async () => {
  awake.clear();
  await Promise.all(running.splice(0).map((w) => w.stop()));
});
afterAll(async () => {
  await h.close();
  await receiver.close();
});

function startWorker(owner: string, extra: Partial<WorkerOptions> = {}): DeliveryWorker {
  const worker = deliveryWorkerFor(h.runtime.services, pino({ level: 'silent' }), {
    owner,
    leaseMs: LEASE_MS,
    pollMs: 60_000, // no polling: a worker claims only when started, woken, or when a slot frees
    ...extra,
  });
  running.push(worker);
  return worker;
}

/**
 * A receiver path that answers nothing until the test says so. Remembers, for each request, which
 * attempts of the same event were still unanswered when it arrived.
 */
function heldPath(p: string) {
  const pending: { eventId: string; attempt: number; res: ServerResponse }[] = [];
  const arrivals: { eventId: string; attempt: number; outstanding: number[] }[] = [];
  receiver.on(p, (req, res, body) => {
    const eventId = String(JSON.parse(body.toString('utf8')).id);
    const attempt = Number(req.headers['x-service-attempt']);
    arrivals.push({ eventId, attempt, outstanding: pending.filter((q) => q.eventId === eventId).map((q) => q.attempt) });
    pending.push({ eventId, attempt, res });
  });
  const find = (eventId: string, attempt: number) => pending.find((q) => q.eventId === eventId && q.attempt === attempt);
  return {
    arrivals,
    arrived: (eventId: string, attempt: number) => arrivals.some((a) => a.eventId === eventId && a.attempt === attempt),
    async answer(eventId: string, attempt: number, status: number) {
      await waitFor(`${eventId} attempt ${attempt} to arrive`, () => !!find(eventId, attempt));
      const q = find(eventId, attempt)!;
      pending.splice(pending.indexOf(q), 1);
      q.res.writeHead(status, { 'Content-Type': 'text/plain' }).end(`answer to attempt ${attempt}`);
    },
    releaseAll() {
      for (const q of pending.splice(0)) q.res.writeHead(200).end();
    },
  };
}

async function leaseRunsOut(eventId: string) {
  const { lease_until: leaseUntil } = await deliveryOf(h, eventId);
  expect(leaseUntil).not.toBeNull();
  await waitFor('the lease to run out', () => Date.now() > Number(leaseUntil) + 20, LEASE_MS + 5000);
}

const logOf = async (eventId: string) =>
  (await attemptsOf(h, eventId)).map((a) => [Number(a.attempt), a.status_code === null ? null : Number(a.status_code), a.error]);

test('a worker does not claim its own attempt again when the attempt outlives the lease', async () => {
  const site = await h.newSite('own-lease');
  await webhooks(h).setEndpoint(site.id, receiver.url('/own-lease'), 'message.created');
  const held = heldPath('/own-lease');
  try {
    const worker = startWorker('worker-own');
    awake.add(worker);
    worker.start();
    await h.visitorSay(site.id, 'v1', 'first');
    const [first] = await eventIdsOf(h, site.id, 'message.created');
    await waitFor('attempt 1 to arrive', () => held.arrived(first, 1));
    await leaseRunsOut(first);

    // A new event makes the worker claim again. The expired row is due earlier than the new one,
    // so the claim that picks the new one up would pick the expired one up too.
    await h.visitorSay(site.id, 'v2', 'second');
    const second = (await eventIdsOf(h, site.id, 'message.created')).find((id) => id !== first)!;
    await held.answer(second, 1, 200);
    expect((await deliveryOf(h, first)).attempts).toBe(1); // not claimed a second time
    expect(held.arrivals.filter((a) => a.eventId === first)).toHaveLength(1);

    // The late answer still counts: nobody took the row over, so it is this attempt's to finish.
    await held.answer(first, 1, 200);
    await waitFor('the first event delivered', async () => (await deliveryOf(h, first)).status === 'delivered');
    expect(await deliveryOf(h, first)).toMatchObject({ status: 'delivered', attempts: 1, lease_owner: null });
    expect(await logOf(first)).toEqual([[1, 200, null]]);
    expect(held.arrivals.filter((a) => a.eventId === first)).toHaveLength(1);
    expect(worker.stats).toMatchObject({ delivered: 2, stale: 0 });
  } finally {
    held.releaseAll();
  }
});

test('with two workers, an attempt answered after its lease was taken over does not overwrite the newer state', async () => {
  const site = await h.newSite('two-leases');
  await webhooks(h).setEndpoint(site.id, receiver.url('/two-leases'), 'message.created');
  const held = heldPath('/two-leases');
  try {
    // Worker A sends attempt 1; the receiver holds it past the lease.
    const a = startWorker('worker-a');
    awake.add(a);
    a.start();
    await h.visitorSay(site.id, 'v1', 'hello');
    const [eventId] = await eventIdsOf(h, site.id, 'message.created');
    await waitFor('attempt 1 to arrive', () => held.arrived(eventId, 1));
    await leaseRunsOut(eventId);

    // Worker B takes the expired lease and sends attempt 2, which gets a 503: retry later. B is
    // stopped before its answer so that it does not come back for the retry itself.
    const b = startWorker('worker-b');
    b.start();
    await waitFor('attempt 2 to arrive', () => held.arrived(eventId, 2));
    const bStopped = b.stop();
    await held.answer(eventId, 2, 503);
    await bStopped;
    const afterB = await deliveryOf(h, eventId);
    expect(afterB).toMatchObject({ status: 'pending', attempts: 2, lease_owner: null });

    // The retry is due while A still waits for attempt 1. A claims (woken by a new event of
    // another visitor, which sits behind the due retry in the claim order).
    await waitFor('the retry to be due', () => Date.now() > Number(afterB.next_attempt_at) + 20);
    await h.visitorSay(site.id, 'v2', 'another');
    const other = (await eventIdsOf(h, site.id, 'message.created')).find((id) => id !== eventId)!;
    await held.answer(other, 1, 200);

    // Attempt 1 finally gets its answer, a 410: final, but stale by now.
    await held.answer(eventId, 1, 410);
    // The retry (attempt 3) goes out and is accepted.
    await held.answer(eventId, 3, 200);
    await waitFor('attempt 3 recorded', async () => (await logOf(eventId)).some(([attempt, status]) => attempt === 3 && status === 200));
    await waitFor('the delivery to settle', async () => (await deliveryOf(h, eventId)).lease_owner === null);

    // The newest attempt decides; every attempt is in the log once, with what really happened.
    expect(await deliveryOf(h, eventId)).toMatchObject({ status: 'delivered', attempts: 3, lease_owner: null, lease_until: null });
    expect(await logOf(eventId)).toEqual([
      [1, 410, null],
      [2, 503, null],
      [3, 200, null],
    ]);
    // A never had two attempts of the event out at once.
    const byA = held.arrivals.filter((r) => r.eventId === eventId && r.attempt !== 2);
    expect(byA.map((r) => [r.attempt, r.outstanding])).toEqual([
      [1, []],
      [3, []],
    ]);
    expect(a.stats).toMatchObject({ stale: 1, delivered: 2, failed: 0 });
    expect(b.stats).toMatchObject({ retry: 1, stale: 0 });
  } finally {
    held.releaseAll();
  }
});

test('a result is applied only by the claim that sent it, even when the same owner claimed the row again', async () => {
  // The worker no longer re-claims its own attempts, but the fence must not depend on that: two
  // processes given the same owner name, or any path that misses the in-flight list, would do it.
  const site = await h.newSite('fence');
  await webhooks(h).setEndpoint(site.id, receiver.url('/fence'), 'message.created');
  await h.visitorSay(site.id, 'v', 'hi');
  const [eventId] = await eventIdsOf(h, site.id, 'message.created');
  const endpointId = (await deliveryOf(h, eventId)).endpoint_id;
  const store = h.runtime.services.stores.events;
  const t0 = Date.now();
  const claim = (now: number) => store.claimDue({ owner: 'same-owner', now, leaseMs: 100, limit: 50, maxAttempts: 4, held: new Map(), allowance: () => 4 });
  const ours = (claimed: Awaited<ReturnType<typeof claim>>['claimed']) => claimed.find((c) => c.delivery.event_id === eventId)!;

  const older = ours((await claim(t0)).claimed);
  const newer = ours((await claim(t0 + 200)).claimed); // the first lease ran out
  expect([older.attempt, newer.attempt]).toEqual([1, 2]);
  const log = (attempt: number, status: number) => ({
    event_id: eventId,
    site_id: site.id,
    endpoint_id: endpointId,
    event_name: 'message.created',
    attempt,
    url: receiver.url('/fence'),
    started_at: t0,
    duration_ms: 250,
    status_code: status,
    error: null,
    response_excerpt: null,
  });

  // Attempt 1's late "410 Gone" would end the delivery as failed while attempt 2 is in flight.
  expect(
    await store.finishAttempt(log(1, 410), eventId, { owner: 'same-owner', attempt: 1 }, { status: 'failed', nextAttemptAt: t0 + 250, now: t0 + 250 }),
  ).toBe(false);
  expect(await deliveryOf(h, eventId)).toMatchObject({ status: 'pending', attempts: 2, lease_owner: 'same-owner' });
  expect(
    await store.finishAttempt(log(2, 200), eventId, { owner: 'same-owner', attempt: 2 }, { status: 'delivered', nextAttemptAt: t0 + 300, now: t0 + 300 }),
  ).toBe(true);
  expect(await deliveryOf(h, eventId)).toMatchObject({ status: 'delivered', attempts: 2, lease_owner: null });
  expect(await logOf(eventId)).toEqual([
    [1, 410, null],
    [2, 200, null],
  ]);
});

test('an address slot is free once the POST has ended, not once its result is written', async () => {
  // One delivery at a time to the address, and a database that takes its time to record results:
  // the second event must reach the receiver while the first result is still being written.
  const site = await h.newSite('slot-after-post');
  await webhooks(h).setEndpoint(site.id, receiver.url('/slot-after-post'), 'message.created');
  const arrivals: number[] = [];
  receiver.on('/slot-after-post', (_req, res) => {
    arrivals.push(Date.now());
    res.writeHead(200).end();
  });
  const events = h.runtime.services.stores.events;
  const written: number[] = [];
  const slowStore = {
    ...events,
    finishAttempts: async (...args: Parameters<typeof events.finishAttempts>) => {
      await new Promise((r) => setTimeout(r, 600));
      const applied = await events.finishAttempts(...args);
      for (const _ of applied) written.push(Date.now());
      return applied;
    },
  };
  const worker = startWorker('worker-slot', { perEndpoint: 1, store: slowStore, leaseMs: 20_000 });
  await h.visitorSay(site.id, 'v1', 'first');
  await h.visitorSay(site.id, 'v2', 'second');
  worker.start();
  await waitFor('both results written', () => written.length === 2, 10_000);
  expect(arrivals).toHaveLength(2);
  expect(arrivals[1]).toBeLessThan(written[0]); // the second POST did not wait for the first write
});
