import { CLAIM_FAILED_PAUSE_MS, createDeliveryEngine, DeliveryProvider, EngineClaim } from '../../server/delivery/engine';

/**
 * A retry is brought by the worker's own retry timer, to the millisecond, not by its poll. The
 * timer's time is forgotten only once a claim has looked at or after it: a claim that started just
 * before (woken by another event) and ended after it did not see the row due. Fake timers (Date
 * included); the poll is an hour, so only the retry timer can bring the retry within the test.
 */

const POLL_MS = 3_600_000;
const PAUSE_MS = 300;
const CLAIM_MS = 10;
const silent = { info() {}, warn() {}, error() {}, debug() {} };

function retryingProvider() {
  const rows = new Map<string, { dueAt: number; attempt: number }>();
  const sent: { key: string; attempt: number; at: number }[] = [];
  const retries: number[] = [];
  const state = { failClaims: 0, claims: 0, hold: null as Promise<void> | null, slowSend: null as Promise<void> | null };
  const provider: DeliveryProvider<EngineClaim, { ok: boolean }, null> = {
    label: 'test delivery',
    kinds: ['event'],
    // The first attempt fails and is retried PAUSE_MS later; the second succeeds.
    schedule: {
      maxAttempts: 3,
      decide: (result, _attempt, now) =>
        result.ok ? { outcome: 'delivered', status: 'delivered', nextAttemptAt: now } : { outcome: 'retry', status: 'pending', nextAttemptAt: now + PAUSE_MS },
    },
    async claimDue(req) {
      state.claims++;
      // A claim takes a moment (the database's round trips), or as long as the test holds it.
      await (state.hold ?? new Promise((r) => setTimeout(r, CLAIM_MS)));
      if (state.failClaims > 0) {
        state.failClaims--;
        throw new Error('connection lost');
      }
      const due = [...rows.entries()].filter(([, r]) => r.dueAt <= req.now).slice(0, req.limit);
      for (const [, r] of due) r.dueAt = Infinity; // leased
      return {
        claimed: due.map(([key, r]) => ({
          key,
          address: 'a',
          attempt: r.attempt,
          leaseUntil: req.now + req.leaseMs,
          roundBase: 0,
          interrupted: null,
          exhausted: false,
        })),
        filled: [],
      };
    },
    async finishAttempts(_owner, outcomes) {
      for (const o of outcomes) {
        const row = rows.get(o.key)!;
        if (o.next.status === 'pending') {
          row.dueAt = o.next.nextAttemptAt;
          row.attempt = o.attempt + 1;
          retries.push(o.next.nextAttemptAt);
        } else rows.delete(o.key);
      }
      return outcomes.map(() => true);
    },
    async logInterrupted() {},
    unsentReason: () => null,
    async send(claim, startedAt) {
      sent.push({ key: claim.key, attempt: claim.attempt, at: startedAt });
      if (claim.key === 'slow' && state.slowSend) await state.slowSend; // an address that takes its time
      if (claim.key === 'slow') return { result: { ok: true }, row: () => null, summary: {} };
      return { result: { ok: claim.attempt > 1 }, row: () => null, summary: {} };
    },
  };
  return { provider, rows, sent, retries, state };
}

function engineOf(
  provider: DeliveryProvider<EngineClaim, { ok: boolean }, null>,
  size: { concurrency: number; leaseMs: number } = { concurrency: 8, leaseMs: 60_000 },
) {
  // A channel that says it is live: no adaptive poll and no probes, so nothing but the retry timer looks.
  const channel = { subscribe: () => () => {}, live: () => true };
  return createDeliveryEngine({ provider, logger: silent, perAddress: 4, attemptTimeoutMs: 5000, pollMs: POLL_MS, channel, ...size });
}

describe("the worker's retry timer", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('a claim woken just before a retry is due, and ending after it, does not lose the retry', async () => {
    const { provider, rows, sent, retries, state } = retryingProvider();
    rows.set('e1', { dueAt: Date.now(), attempt: 1 });
    const worker = engineOf(provider);
    worker.start();
    await jest.advanceTimersByTimeAsync(100); // the first attempt, failed, its retry recorded
    expect(sent.map((s) => s.attempt)).toEqual([1]);
    expect(retries).toHaveLength(1);
    const dueAt = retries[0];

    // Another event wakes the worker just before the retry is due: its claim sees nothing due yet,
    // and it returns after the retry's time, before the retry's timer has run (a busy event loop
    // runs the claim's answer first): the clock moves without firing timers.
    await jest.advanceTimersByTimeAsync(dueAt - 5 - Date.now());
    let release!: () => void;
    state.hold = new Promise<void>((r) => (release = r));
    worker.wake();
    await jest.advanceTimersByTimeAsync(0);
    jest.setSystemTime(dueAt + 1);
    state.hold = null;
    release();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(sent.map((s) => s.attempt)).toEqual([1, 2]);
    // Sent when due, not a poll later.
    expect(sent[1].at - dueAt).toBeLessThanOrEqual(2 * CLAIM_MS);
    await worker.stop();
  });

  test('a claim that fails while a retry is due is tried again after a pause, not at the next poll, and not in a busy loop', async () => {
    const { provider, rows, sent, retries, state } = retryingProvider();
    rows.set('e1', { dueAt: Date.now(), attempt: 1 });
    const worker = engineOf(provider);
    worker.start();
    await jest.advanceTimersByTimeAsync(100);
    const dueAt = retries[0];
    state.failClaims = 2; // the database is away for the next two claims
    const claimsBefore = state.claims;
    await jest.advanceTimersByTimeAsync(dueAt - Date.now() + 3 * CLAIM_FAILED_PAUSE_MS);
    expect(sent.map((s) => s.attempt)).toEqual([1, 2]);
    // Two failed claims, the one that took the row, a pause apart, and the look after its result:
    // not a claim per millisecond.
    expect(state.claims - claimsBefore).toBeLessThanOrEqual(4);
    expect(sent[1].at - dueAt).toBeGreaterThanOrEqual(2 * CLAIM_FAILED_PAUSE_MS);
    await worker.stop();
  });

  test('a retry due while every slot is taken waits for a free slot without spinning, then goes at once', async () => {
    const { provider, rows, sent, retries, state } = retryingProvider();
    // One slot and no rows claimed ahead (the lease leaves no time to wait for a slot).
    const worker = engineOf(provider, { concurrency: 1, leaseMs: 10_000 });
    rows.set('e1', { dueAt: Date.now(), attempt: 1 });
    worker.start();
    await jest.advanceTimersByTimeAsync(100);
    const dueAt = retries[0];
    let release!: () => void;
    state.slowSend = new Promise<void>((r) => (release = r));
    rows.set('slow', { dueAt: Date.now(), attempt: 1 });
    worker.wake();
    await jest.advanceTimersByTimeAsync(50);
    expect(sent.map((s) => s.key)).toEqual(['e1', 'slow']);

    // The retry comes due while the slot is taken: a few looks at most, not one a millisecond.
    const timers = jest.spyOn(global, 'setTimeout');
    await jest.advanceTimersByTimeAsync(dueAt - Date.now() + 2_000);
    expect(timers.mock.calls.length).toBeLessThan(20);
    timers.mockRestore();
    expect(sent.map((s) => s.key)).toEqual(['e1', 'slow']);

    // The slot frees: the retry goes at once.
    const freedAt = Date.now();
    release();
    await jest.advanceTimersByTimeAsync(200);
    expect(sent.map((s) => `${s.key}#${s.attempt}`)).toEqual(['e1#1', 'slow#1', 'e1#2']);
    expect(sent[2].at - freedAt).toBeLessThanOrEqual(100);
    await worker.stop();
  });
});
