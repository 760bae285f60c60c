import { createDeliveryEngine, DeliveryProvider, EngineClaim, PROBE_MS } from '../../server/delivery/engine';

/**
 * A worker nobody wakes (no Redis, another process writes): its poll backs off to `pollMs` while
 * idle, and the probe between polls bounds how long a row written after a quiet spell waits.
 * Fake timers (Date included), so the counts are steps of the clock, not of the machine.
 */

const POLL_MS = 1000;
const silent = { info() {}, warn() {}, error() {}, debug() {} };

function fakeProvider() {
  const calls = { claims: 0, probes: 0, sent: [] as { key: string; at: number }[] };
  /** Rows due now; `takeable` false: another worker holds them locked, so claims find nothing. */
  const state = { due: [] as string[], takeable: true };
  const provider: DeliveryProvider<EngineClaim, { ok: true }, null> = {
    label: 'test delivery',
    kinds: ['event'],
    schedule: { maxAttempts: 3, decide: (_r, _a, now) => ({ outcome: 'delivered', status: 'delivered', nextAttemptAt: now }) },
    async anyDue() {
      calls.probes++;
      return state.due.length > 0;
    },
    async claimDue(req) {
      calls.claims++;
      if (!state.takeable) return { claimed: [], filled: [] };
      const keys = state.due.splice(0, req.limit);
      return {
        claimed: keys.map((key) => ({ key, address: 'a', attempt: 1, leaseUntil: req.now + req.leaseMs, roundBase: 0, interrupted: null, exhausted: false })),
        filled: [],
      };
    },
    async finishAttempts(_owner, outcomes) {
      return outcomes.map(() => true);
    },
    async logInterrupted() {},
    unsentReason: () => null,
    async send(claim, startedAt) {
      calls.sent.push({ key: claim.key, at: startedAt });
      return { result: { ok: true }, row: () => null, summary: {} };
    },
  };
  return { provider, calls, state };
}

function engineOf(provider: DeliveryProvider<EngineClaim, { ok: true }, null>) {
  return createDeliveryEngine({ provider, logger: silent, concurrency: 8, perAddress: 4, attemptTimeoutMs: 5000, leaseMs: 60_000, pollMs: POLL_MS });
}

describe('the probe of a worker nobody wakes', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('an idle worker claims once a poll period and probes every PROBE_MS; a row written then waits at most two probes', async () => {
    const { provider, calls, state } = fakeProvider();
    const worker = engineOf(provider);
    worker.start();
    await jest.advanceTimersByTimeAsync(10_000); // backed off to the full poll
    const before = { ...calls, sent: calls.sent.length };
    await jest.advanceTimersByTimeAsync(10_000);
    // Idle: a claim's transaction once a second, and the probe's single-row read 20 times a second.
    expect(calls.claims - before.claims).toBeLessThanOrEqual(10);
    expect(calls.probes - before.probes).toBeGreaterThanOrEqual((10_000 / PROBE_MS) * 0.9);
    expect(calls.probes - before.probes).toBeLessThanOrEqual(10_000 / PROBE_MS);

    // Another process commits a due row, and nobody tells us.
    const writtenAt = Date.now();
    state.due.push('e1');
    await jest.advanceTimersByTimeAsync(2 * PROBE_MS);
    expect(calls.sent.map((s) => s.key)).toEqual(['e1']);
    expect(calls.sent[0].at - writtenAt).toBeLessThanOrEqual(2 * PROBE_MS);
    await worker.stop();
  });

  test('a due row that claims cannot take (locked by another worker) costs one extra claim a poll period, not one a probe', async () => {
    const { provider, calls, state } = fakeProvider();
    const worker = engineOf(provider);
    worker.start();
    await jest.advanceTimersByTimeAsync(10_000);
    state.due.push('held-elsewhere');
    state.takeable = false;
    const claimsBefore = calls.claims;
    await jest.advanceTimersByTimeAsync(10_000);
    // Ten regular looks, and at most one probe-started claim after each.
    expect(calls.claims - claimsBefore).toBeLessThanOrEqual(2 * (10_000 / POLL_MS) + 1);
    expect(calls.sent).toEqual([]);

    // Once the other worker lets go, the row is taken at the next look.
    state.takeable = true;
    await jest.advanceTimersByTimeAsync(POLL_MS + PROBE_MS);
    expect(calls.sent.map((s) => s.key)).toEqual(['held-elsewhere']);
    await worker.stop();
  });
});
