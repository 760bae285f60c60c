import { createResultBatcher } from '../../server/delivery/result-batcher';
import { fakeClock } from './fake-clock';

/** The result batcher with a fake clock: flush after the gathering time, at a full group, and on stop. No database. */
function setup(opts: { maxPerFlush?: number; flushMs?: number } = {}) {
  const clock = fakeClock();
  const flushed: { at: number; items: number[] }[] = [];
  let idle = 0;
  const batcher = createResultBatcher<number>({
    gatherMs: 20,
    maxPerFlush: opts.maxPerFlush ?? 5,
    timers: clock,
    flush: async (group) => {
      flushed.push({ at: clock.now(), items: group });
      if (opts.flushMs) await new Promise<void>((resolve) => clock.setTimeout(resolve, opts.flushMs!));
    },
    onIdle: () => idle++,
  });
  return { clock, flushed, batcher, idle: () => idle };
}
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('the first item waits the gathering time for others, then all go in one flush', async () => {
  const { clock, flushed, batcher, idle } = setup();
  const t0 = clock.now();
  batcher.add(1);
  clock.advance(10);
  batcher.add(2);
  clock.advance(9);
  expect(flushed).toEqual([]);
  clock.advance(1);
  await settle();
  expect(flushed).toEqual([{ at: t0 + 20, items: [1, 2] }]);
  expect(idle()).toBe(1);
  expect(clock.pending()).toBe(0);
});

test('a full group goes at once, without waiting', async () => {
  const { clock, flushed, batcher } = setup({ maxPerFlush: 3 });
  const t0 = clock.now();
  [1, 2, 3].forEach((i) => batcher.add(i));
  await settle();
  expect(flushed).toEqual([{ at: t0, items: [1, 2, 3] }]);
  expect(clock.pending()).toBe(0); // the gathering timer was cleared
});

test('items that arrive while a flush runs go with the next one, in groups of at most maxPerFlush', async () => {
  const { clock, flushed, batcher } = setup({ maxPerFlush: 2, flushMs: 50 });
  batcher.add(1);
  batcher.add(2); // full: flushing now, for 50 ms
  for (let i = 3; i <= 7; i++) batcher.add(i);
  expect(batcher.size).toBe(5);
  for (let i = 0; i < 4; i++) {
    clock.advance(50);
    await settle();
  }
  expect(flushed.map((f) => f.items)).toEqual([[1, 2], [3, 4], [5, 6], [7]]);
  await batcher.idle();
});

test('stop flushes what waits at once, and every item after it too; no idle call after stop', async () => {
  const { clock, flushed, batcher, idle } = setup();
  const t0 = clock.now();
  batcher.add(1);
  batcher.stop();
  await batcher.idle();
  expect(flushed).toEqual([{ at: t0, items: [1] }]);
  batcher.add(2);
  await batcher.idle();
  expect(flushed.map((f) => f.items)).toEqual([[1], [2]]);
  expect(idle()).toBe(0);
  expect(clock.pending()).toBe(0);
});

test('a flush that throws loses only its group: the next one is still written', async () => {
  const clock = fakeClock();
  const written: number[][] = [];
  const errors: number[][] = [];
  const batcher = createResultBatcher<number>({
    gatherMs: 20,
    maxPerFlush: 1,
    timers: clock,
    flush: async (group) => {
      if (group[0] === 1) throw new Error('database gone');
      written.push(group);
    },
    onError: (_err, group) => errors.push(group),
  });
  batcher.add(1);
  batcher.add(2);
  await batcher.idle();
  expect(errors).toEqual([[1]]);
  expect(written).toEqual([[2]]);
});
