import { addressesLeftOut, createScheduler, heldPerAddress, LEAVE_OUT_EVERY_MS, ScheduledRow, takeWithinAllowance } from '../../server/delivery/scheduler';
import { fakeClock } from './fake-clock';

/** The per-address scheduler with a fake clock: caps, round-robin, fairness, claiming ahead. No database. */
type Row = ScheduledRow & { id: string };
let seq = 0;
const row = (address: string): Row => ({ id: `${address}${++seq}`, address, state: 'preparing', queuedAt: 0, blocked: false });
const rows = (address: string, n: number) => Array.from({ length: n }, () => row(address));

function setup(opts: { concurrency?: number; perAddress?: number; maxWaitMs?: number } = {}) {
  const clock = fakeClock();
  const scheduler = createScheduler<Row>({
    concurrency: opts.concurrency ?? 4,
    perAddress: opts.perAddress ?? 2,
    maxWaitMs: opts.maxWaitMs ?? 5000,
    resultsPerCommit: 200,
    now: clock.now,
  });
  /** Takes the turns, checks the caps after each, and answers the rows started. */
  const started = () => scheduler.turns().map((t) => (expect(t.action).toBe('send'), t.row));
  return { clock, scheduler, started };
}

test('never more POSTs at once than the cap per address and the worker-wide cap', () => {
  const { scheduler, started } = setup({ concurrency: 5, perAddress: 2 });
  [...rows('a', 10), ...rows('b', 10), ...rows('c', 10)].forEach((r) => scheduler.enqueue(r));
  const first = started();
  expect(first.map((r) => r.address)).toEqual(['a', 'a', 'b', 'b', 'c']);
  expect(scheduler.sending).toBe(5);
  expect(started()).toEqual([]); // full: nothing more until one ends
  // `c`, cut off by the worker-wide cap, went to the back of the line with the others served.
  scheduler.sent(first[0], 10);
  expect(started().map((r) => r.address)).toEqual(['a']);
  scheduler.sent(first[2], 10);
  expect(started().map((r) => r.address)).toEqual(['b']);
  scheduler.sent(first[1], 10);
  scheduler.sent(first[3], 10);
  expect(started().map((r) => r.address)).toEqual(['c', 'a']); // `c` at its cap of two, `a` at one of two
  expect(started()).toEqual([]);
});

test('addresses take free slots round-robin: one served goes to the back of the line', () => {
  const { scheduler, started } = setup({ concurrency: 1, perAddress: 1 });
  [...rows('a', 3), ...rows('b', 3), ...rows('c', 3)].forEach((r) => scheduler.enqueue(r));
  const order: string[] = [];
  for (let i = 0; i < 9; i++) {
    const [r] = started();
    order.push(r.address);
    scheduler.sent(r, 5);
  }
  expect(order.join('')).toBe('abcabcabc');
  expect(scheduler.queued).toBe(0);
});

test('a slow address with a deep backlog cannot starve another: a newcomer gets the next free slot', () => {
  const { scheduler, started } = setup({ concurrency: 4, perAddress: 4 });
  rows('slow', 1000).forEach((r) => scheduler.enqueue(r));
  const open = started();
  expect(open).toHaveLength(4);
  rows('fast', 3).forEach((r) => scheduler.enqueue(r));
  const served: string[] = [];
  // Every slot that frees goes alternately to each address with rows waiting, whatever their depth.
  for (let i = 0; i < 6; i++) {
    scheduler.sent(open.shift()!, 30_000);
    const next = started();
    served.push(...next.map((r) => r.address));
    open.push(...next.filter((r) => r.address === 'slow'));
    for (const r of next.filter((r) => r.address === 'fast')) scheduler.sent(r, 5);
  }
  expect(served.filter((a) => a === 'fast')).toHaveLength(3);
  expect(served.slice(0, 2)).toContain('fast');
});

test('a claim takes at most the allowance of each address, and says which filled up when the read was full', () => {
  const candidates = [...['a', 'a', 'a', 'a', 'a', 'a'].map((a) => ({ endpoint_id: a })), { endpoint_id: 'b' }, { endpoint_id: 'a' }];
  const { chosen, filled } = takeWithinAllowance(candidates, { limit: 8, held: new Map([['a', 1]]), allowance: () => 3 });
  expect(chosen.map((r) => r.endpoint_id)).toEqual(['a', 'a', 'b']);
  expect(filled).toEqual(['a']);
  // A read that was not full returned every row due: nothing is hidden behind the skipped ones.
  expect(takeWithinAllowance(candidates, { limit: 9, held: new Map(), allowance: () => 3 }).filled).toEqual([]);
  expect(
    addressesLeftOut(
      new Map([
        ['a', 3],
        ['b', 2],
      ]),
      () => 3,
      ['c'],
    ),
  ).toEqual(new Set(['c', 'a']));
});

test('a deep backlog leaves room in a claim for others: rows beyond its allowance are skipped, and a round that leaves it out runs at most every LEAVE_OUT_EVERY_MS', () => {
  const { clock, scheduler } = setup();
  const backlog = Array.from({ length: 50 }, () => ({ endpoint_id: 'deep' }));
  const first = takeWithinAllowance(backlog, { limit: 50, held: new Map(), allowance: scheduler.allowance });
  expect(first.chosen).toHaveLength(2); // an address not yet seen gets no rows ahead
  expect(scheduler.afterClaim(first.chosen.length, 50, first.filled.length)).toEqual({ again: true, leaveOut: true });
  clock.advance(100);
  expect(scheduler.afterClaim(2, 50, 1)).toEqual({ again: false, leaveOut: false, laterInMs: LEAVE_OUT_EVERY_MS - 100 });
  clock.advance(LEAVE_OUT_EVERY_MS - 100);
  expect(scheduler.afterClaim(2, 50, 1)).toEqual({ again: true, leaveOut: true });
  expect(scheduler.afterClaim(50, 50, 0)).toEqual({ again: true, leaveOut: false });
});

test('claiming ahead follows the pace: a fast address may hold more rows than its slots, a slow one only its slots', () => {
  const { scheduler } = setup({ perAddress: 2, maxWaitMs: 5000 });
  const fast = row('fast');
  const slow = row('slow');
  expect(scheduler.allowance('fast')).toBe(2);
  for (const r of [fast, slow]) scheduler.enqueue(r);
  scheduler.turns();
  scheduler.sent(fast, 10);
  scheduler.sent(slow, 4000);
  expect(scheduler.allowance('fast')).toBe(2 + Math.floor((2 * 1000) / 10));
  expect(scheduler.allowance('slow')).toBe(2);
  // Without room to wait inside the lease, nothing is claimed ahead.
  const none = setup({ maxWaitMs: 0 }).scheduler;
  const r = row('fast');
  none.enqueue(r);
  none.turns();
  none.sent(r, 1);
  expect(none.allowance('fast')).toBe(2);
  expect(none.aheadTotal).toBe(0);
});

test('a row claimed ahead that waited longer than its lease allows is given back; one served at its first turn is sent', () => {
  const { clock, scheduler } = setup({ concurrency: 1, perAddress: 1, maxWaitMs: 1000 });
  const [a1, a2, a3] = rows('a', 3);
  [a1, a2, a3].forEach((r) => scheduler.enqueue(r));
  expect(scheduler.turns()).toEqual([{ row: a1, action: 'send' }]);
  scheduler.markBlocked([a1, a2, a3]);
  expect(a1.blocked).toBe(false);
  expect(a2.blocked).toBe(true);
  clock.advance(1001);
  scheduler.sent(a1, 1001);
  expect(scheduler.turns()).toEqual([
    { row: a2, action: 'giveBack' },
    { row: a3, action: 'giveBack' },
  ]);
  // Not blocked (its first turn): sent however long it waited.
  const b = row('b');
  scheduler.enqueue(b);
  clock.advance(5000);
  expect(scheduler.turns()).toEqual([{ row: b, action: 'send' }]);
});

test('the claim limit counts rows queued, sending and waiting to be written; stop drains the queues', () => {
  const { scheduler } = setup({ concurrency: 4, perAddress: 2, maxWaitMs: 5000 });
  expect(scheduler.aheadTotal).toBe(256);
  expect(scheduler.claimLimit(0)).toBe(4 + 256);
  const all = rows('a', 5);
  all.forEach((r) => scheduler.enqueue(r));
  scheduler.turns();
  expect(scheduler.claimLimit(5)).toBe(4 + 256 - 5);
  expect(scheduler.claimLimit(4 + 256 + 200)).toBe(0); // results of a stalled commit are not claimed past
  expect(scheduler.wantsMore()).toBe(true);
  expect(heldPerAddress([...all, { ...row('b'), state: 'writing' }])).toEqual(new Map([['a', 5]]));
  expect(scheduler.drain()).toEqual(all.slice(2));
  expect(scheduler.queued).toBe(0);
  expect(scheduler.turns()).toEqual([]);
});
