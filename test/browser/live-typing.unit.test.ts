/** Typing as the browser code reports it and shows it (server/browser-shared/typing.ts), on a fake clock. */
import { createTypingIndicator, createTypingReporter, Timers, TYPING_PAUSE_MS, TYPING_RENEW_MS, TYPING_SHOWN_MS } from '../../server/browser-shared/typing';

function fakeTimers() {
  let t = 0;
  let timers: { at: number; fn: () => void; id: number }[] = [];
  let next = 0;
  const clock: Timers = {
    now: () => t,
    setTimeout: (fn, ms) => {
      timers.push({ at: t + ms, fn, id: ++next });
      return next;
    },
    clearTimeout: (id) => void (timers = timers.filter((x) => x.id !== id)),
  };
  const advance = (ms: number) => {
    const until = t + ms;
    for (;;) {
      const due = timers.filter((x) => x.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      timers = timers.filter((x) => x !== due);
      t = due.at;
      due.fn();
    }
    t = until;
  };
  return { clock, advance };
}

test('a start at the first key, renewed every 2 s while keys come, a stop after a pause or at send', () => {
  const { clock, advance } = fakeTimers();
  const sent: boolean[] = [];
  const r = createTypingReporter((x) => sent.push(x), clock);
  for (let i = 0; i < 25; i++) {
    r.input();
    advance(200); // 5 s of typing, a key every 200 ms
  }
  expect(sent).toEqual([true, true, true]); // at 0, 2 and 4 s
  advance(TYPING_PAUSE_MS);
  expect(sent).toEqual([true, true, true, false]);
  r.input();
  r.stop(); // sent
  r.stop();
  expect(sent).toEqual([true, true, true, false, true, false]);
  advance(TYPING_RENEW_MS * 5);
  expect(sent).toHaveLength(6);
});

test('the other side is shown typing until a stop, or 6 s after its last start', () => {
  const { clock, advance } = fakeTimers();
  const changes: boolean[] = [];
  const ind = createTypingIndicator((x) => changes.push(x), clock);
  ind.heard(true);
  advance(TYPING_SHOWN_MS - 1000);
  ind.heard(true); // a renewal keeps it
  advance(TYPING_SHOWN_MS - 1000);
  expect(ind.shown()).toBe(true);
  advance(1000);
  expect(ind.shown()).toBe(false);
  ind.heard(true);
  ind.heard(false);
  expect(changes).toEqual([true, false, true, false]);
});
