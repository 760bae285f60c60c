import { toIso, toIsoRequired } from '../../server/platform/time';
import { newId } from '../../server/platform/ids';
import { memoised } from '../../server/platform/memo';

/**
 * Answers format stored times (integer ms since the epoch) with a cached date part and arithmetic
 * for the time of day (server/platform/time.ts). It must say exactly what Date#toISOString says.
 */
const iso = (ms: number) => new Date(ms).toISOString();

test('every kind of moment formats as Date#toISOString does', () => {
  const edges = [
    0,
    1,
    999,
    86_399_999,
    86_400_000,
    Date.UTC(2000, 1, 29, 23, 59, 59, 999), // a leap day of a year divisible by 400
    Date.UTC(2100, 2, 1, 0, 0, 0, 0), // no leap day in 2100
    Date.UTC(2026, 11, 31, 23, 59, 59, 999),
    Date.UTC(2027, 0, 1),
    Date.UTC(9999, 11, 31, 23, 59, 59, 999), // the last four-digit year
  ];
  for (const ms of edges) expect(toIsoRequired(ms)).toBe(iso(ms));
  let seed = 42;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 20_000; i++) {
    const ms = Math.floor(random() * Date.UTC(10000, 0, 1));
    expect(toIsoRequired(ms)).toBe(iso(ms));
    expect(toIsoRequired(String(ms))).toBe(iso(ms)); // mysql2 may answer BIGINT as a string
  }
});

test('what is never stored still formats as Date does, or fails as Date does', () => {
  for (const ms of [-1, -86_400_001, 1.5, Date.UTC(10000, 0, 1), 8.64e15]) expect(toIsoRequired(ms)).toBe(iso(ms));
  expect(() => toIsoRequired(Number.NaN)).toThrow(RangeError);
  expect(() => toIsoRequired('not a time')).toThrow(RangeError);
  expect(toIso(null)).toBeNull();
  expect(toIso(undefined)).toBeNull();
});

test("ids: the document's pattern, never repeated across refills of the random pool, in creation order within a process", () => {
  const ids = Array.from({ length: 10_000 }, () => newId('conv')); // 160 KB of randomness: many refills of the 4 KiB pool
  for (const id of ids) expect(id).toMatch(/^conv_[0-9a-hjkmnp-tv-z]{26}$/);
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
  // The random part is random: over many ids every one of the 32 digits turns up at each position.
  const later = Array.from({ length: 2000 }, (_, i) => newId('msg', 1_700_000_000_000 + i)); // a new time each: fresh randomness
  for (let pos = 15; pos < 30; pos++) expect(new Set(later.map((id) => id[pos])).size).toBe(32);
});

test('memoised: a result is computed once, and everything is forgotten once the bound is reached', () => {
  let computed = 0;
  const square = memoised(3, (n: number) => (computed++, n * n));
  expect([square(2), square(2), square(3), square(4)]).toEqual([4, 4, 9, 16]);
  expect(computed).toBe(3);
  expect(square(5)).toBe(25); // the fourth key: the three kept are forgotten
  expect(square(2)).toBe(4);
  expect(computed).toBe(5);
});
