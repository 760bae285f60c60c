/**
 * The search's plan (server/search/plan.ts): walk the list's index in windows while the word is
 * common enough to fill the page within the budget, else the full-text index. Pure, no database:
 * the walk is simulated over a site where every `every`-th conversation matches.
 */
import { FIRST_WINDOW, MAX_WINDOWS, WALK_BUDGET, searchStep, type SearchProgress } from '../../server/search/plan';
import { rowHoldsWords } from '../../server/db/fulltext';

/** Runs the plan over a simulated site; answers the windows walked, the conversations walked and whether the index was asked. */
function simulate(opts: { conversations: number; matchesAt: (position: number) => boolean; wanted: number }) {
  const progress: SearchProgress = { walked: 0, windows: 0, found: 0, wanted: opts.wanted };
  const windows: number[] = [];
  for (;;) {
    const step = searchStep(progress);
    if (step.kind === 'index') return { windows, walked: progress.walked, index: true };
    windows.push(step.window);
    let found = progress.found;
    for (let p = progress.walked; p < Math.min(opts.conversations, progress.walked + step.window) && found < opts.wanted; p++) if (opts.matchesAt(p)) found++;
    if (found >= opts.wanted || progress.walked + step.window >= opts.conversations) return { windows, walked: progress.walked + step.window, index: false };
    Object.assign(progress, { walked: progress.walked + step.window, windows: progress.windows + 1, found });
  }
}

test('a common word fills the page in the first window: no index, one window', () => {
  expect(simulate({ conversations: 100_000, matchesAt: (p) => p % 2 === 0, wanted: 26 })).toEqual({
    windows: [FIRST_WINDOW],
    walked: FIRST_WINDOW,
    index: false,
  });
});

test('a word in one conversation of ten takes a second window sized from the first', () => {
  const run = simulate({ conversations: 100_000, matchesAt: (p) => p % 10 === 0, wanted: 26 });
  expect(run.index).toBe(false);
  expect(run.windows).toHaveLength(2);
  expect(run.windows[1]).toBeGreaterThan(FIRST_WINDOW);
});

test('a word with no match in the first window goes to the index at once', () => {
  expect(simulate({ conversations: 10_000_000, matchesAt: () => false, wanted: 26 })).toEqual({ windows: [FIRST_WINDOW], walked: FIRST_WINDOW, index: true });
});

test('a word too rare to fill the page within the budget goes to the index after the first window', () => {
  const run = simulate({ conversations: 10_000_000, matchesAt: (p) => p % 1000 === 5, wanted: 26 });
  expect(run).toEqual({ windows: [FIRST_WINDOW], walked: FIRST_WINDOW, index: true });
});

test('the walk is bounded whatever the matches: at most the budget and MAX_WINDOWS windows', () => {
  // Adversarial: matches only where they make every estimate too hopeful.
  for (const every of [2, 3, 7, 40, 63, 64, 65, 100, 200]) {
    for (const skew of [(p: number) => p < FIRST_WINDOW && p % every === 0, (p: number) => p % every === 0 && p < 300]) {
      const run = simulate({ conversations: 10_000_000, matchesAt: skew, wanted: 101 });
      expect(run.windows.length).toBeLessThanOrEqual(MAX_WINDOWS);
      expect(run.walked).toBeLessThanOrEqual(WALK_BUDGET);
    }
  }
});

test("SQLite's row test folds as FTS5's unicode61 tokenizer: case, diacritics off Latin letters only, tokens of letters, digits and _", () => {
  expect(rowHoldsWords('Où est ma Crème brûlée?', 'creme brul')).toBe(1);
  expect(rowHoldsWords('e\u0301te\u0301 naïve', 'ete naive')).toBe(1);
  expect(rowHoldsWords('reorder now', 'order')).toBe(0);
  expect(rowHoldsWords('snake_case_word', 'case')).toBe(0);
  expect(rowHoldsWords('snake_case_word', 'snake_ca')).toBe(1);
  expect(rowHoldsWords('заказ йогурт', 'йог')).toBe(1);
  expect(rowHoldsWords('заказ йогурт', 'иог')).toBe(0); // not Latin: the breve stays
  expect(rowHoldsWords('order shipped', 'order refund')).toBe(0);
});
