/**
 * Typing, as the chat window's composer and the dashboard's report it and show the other side's
 * (DECISIONS, "The inbox in depth": at most one start every 2 s, a stop after a pause, shown until
 * 6 s after the last start). Only whether someone types ever leaves the browser, never what.
 * Timers are passed in, so the unit tier runs it on a fake clock.
 */

/** A start is renewed this often while keys keep coming (the service passes on no more). */
export const TYPING_RENEW_MS = 2_000;
/** No key for this long: the typist paused, a stop is sent. */
export const TYPING_PAUSE_MS = 3_000;
/** The other side's "typing" is hidden this long after its last start, if no stop came (a closed tab, a lost stop). */
export const TYPING_SHOWN_MS = 6_000;

export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const browserTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** Reports the local typist: `input()` at each change of the text, `stop()` once sent (or the conversation left). */
export function createTypingReporter(report: (typing: boolean) => void, timers: Timers = browserTimers) {
  let typing = false;
  let lastStart = -Infinity;
  let pause: unknown = null;
  const stop = () => {
    if (pause !== null) timers.clearTimeout(pause);
    pause = null;
    if (!typing) return;
    typing = false;
    report(false);
  };
  return {
    input() {
      const t = timers.now();
      if (!typing || t - lastStart >= TYPING_RENEW_MS) {
        typing = true;
        lastStart = t;
        report(true);
      }
      if (pause !== null) timers.clearTimeout(pause);
      pause = timers.setTimeout(stop, TYPING_PAUSE_MS);
    },
    stop,
  };
}

/** Whether the other side is shown typing: on at a start, off at a stop or `TYPING_SHOWN_MS` after the last start. */
export function createTypingIndicator(onChange: (shown: boolean) => void, timers: Timers = browserTimers) {
  let shown = false;
  let expiry: unknown = null;
  const set = (on: boolean) => {
    if (expiry !== null) timers.clearTimeout(expiry);
    expiry = on ? timers.setTimeout(() => set(false), TYPING_SHOWN_MS) : null;
    if (on === shown) return;
    shown = on;
    onChange(on);
  };
  return { heard: set, shown: () => shown };
}
