/**
 * The pure rules of typing and "seen" (DECISIONS, "The inbox in depth"): no database, a clock
 * passed in, unit-tested in test/window/live-rules.unit.test.ts.
 */

/** At most one "typing" a this long per typist and conversation is passed on. */
export const TYPING_THROTTLE_MS = 2_000;
/** A "typing" not renewed within this long is over: the other side hides it by itself. */
export const TYPING_EXPIRES_MS = 6_000;
/** Typists remembered at most (one instance); the oldest are forgotten first. */
const TYPING_KEYS_MAX = 10_000;

/**
 * Which typing reports are passed on to the other side's streams: a start at most once a
 * `TYPING_THROTTLE_MS` per key, stops in between or not (a renewal while typing goes on), a stop
 * only while a start is shown (passed, not stopped, not expired). A client reporting every
 * keystroke, or flipping start and stop, costs the other side at most two events a
 * `TYPING_THROTTLE_MS`.
 */
export function createTypingThrottle(now: () => number, opts: { throttleMs?: number; expiresMs?: number; maxKeys?: number } = {}) {
  const throttleMs = opts.throttleMs ?? TYPING_THROTTLE_MS;
  const expiresMs = opts.expiresMs ?? TYPING_EXPIRES_MS;
  const maxKeys = opts.maxKeys ?? TYPING_KEYS_MAX;
  /** key -> when its last start was passed on and whether it is still shown; oldest start first. */
  const last = new Map<string, { startedAt: number; shown: boolean }>();

  function forget(t: number) {
    for (const [key, v] of last) {
      if (last.size <= maxKeys && t - v.startedAt < expiresMs) break;
      last.delete(key);
    }
  }

  return {
    /** Whether this report of `key` (a typist in a conversation) is passed on; remembers it when so. */
    pass(key: string, typing: boolean): boolean {
      const t = now();
      forget(t);
      const prev = last.get(key);
      if (!typing) {
        if (!prev?.shown) return false;
        prev.shown = false;
        return true;
      }
      if (prev && t - prev.startedAt < throttleMs) return false;
      last.delete(key);
      last.set(key, { startedAt: t, shown: true });
      return true;
    },
    size: () => last.size,
  };
}

/** A message's place in its conversation's order: (`createdAt`, `id`). */
export interface Ordered {
  createdAt: number;
  id: string;
}

/** Whether a "seen" of `next` moves the mark forward from `current` (never back, a repeat changes nothing). */
export function seenMovesForward(current: Ordered | undefined, next: Ordered): boolean {
  if (!current) return true;
  return next.createdAt > current.createdAt || (next.createdAt === current.createdAt && next.id > current.id);
}
