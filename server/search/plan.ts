/**
 * How a page of a search is found (pure; test/search/plan.unit.test.ts), step by step, by the
 * conversation store (server/conversations/store.ts):
 * - `walk`: the next `window` conversations of the list's own index, newest first (the keyset order
 *   of every list), each tested against its own search entries; the page's rows are the first that
 *   match. Its cost is the window, whatever the word: fast when the word is common.
 * - `index`: the rest of the page from the full-text index, below where the walk stopped. Its cost
 *   is the word's whole list of matches (InnoDB reads it before any condition, order or limit
 *   applies): fast when the word is rare.
 * A word's frequency is not known in advance, so the first window is small and serves as the
 * estimate: the next step is chosen from the matches seen per conversation walked. A word that
 * matches nothing there, or too rarely to fill the page within the walk's budget, goes to the index
 * at once, so a search never walks more than WALK_BUDGET conversations nor more than MAX_WINDOWS
 * windows (two statements each), and an unmatched word on a huge site costs one small window.
 */

/** Conversations of the first window: the estimate's sample, cheap enough to precede every rare word's look-up. */
export const FIRST_WINDOW = 128;
/** Conversations a page walks at most before the index takes over. */
export const WALK_BUDGET = 1024;
/** Windows a page walks at most (each is two statements). */
export const MAX_WINDOWS = 4;

export type SearchStep = { kind: 'walk'; window: number } | { kind: 'index' };

/** Where a page's search stands: conversations walked, windows used, rows found, rows the page wants. */
export interface SearchProgress {
  walked: number;
  windows: number;
  found: number;
  wanted: number;
}

/** The next step of a page's search, the same on both engines (docs/performance.md, "The inbox search"). */
export function searchStep(progress: SearchProgress): SearchStep {
  const { walked, windows, found, wanted } = progress;
  if (windows === 0) return { kind: 'walk', window: FIRST_WINDOW };
  const left = WALK_BUDGET - walked;
  if (found === 0 || windows >= MAX_WINDOWS || left <= 0) return { kind: 'index' };
  // Conversations the rest of the page needs at the rate seen so far.
  const expected = Math.ceil(((wanted - found) * walked) / found);
  if (expected > left) return { kind: 'index' };
  // Twice the estimate, so a rate a little lower than the sample's still ends in this window.
  return { kind: 'walk', window: Math.min(left, Math.max(FIRST_WINDOW, 2 * expected)) };
}
