import { memoised } from './memo';

/** Database rows keep times as integer milliseconds since the epoch: exact, sortable and the same on SQLite and MySQL. */
export function toIsoRequired(ms: number | string): string {
  const t = Number(ms);
  // Outside whole milliseconds of years 1970–9999 (never a stored time), Date's own formatting and errors.
  if (!Number.isInteger(t) || t < 0 || t >= LAST_FOUR_DIGIT_YEAR_MS) return new Date(t).toISOString();
  const day = Math.floor(t / DAY_MS);
  const date = dateOfDay(day);
  // A page of messages or conversations shares a handful of days: their date part is formatted
  // once, the time of day with arithmetic (UTC has no leap seconds in JavaScript's time).
  let rest = t - day * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  return `${date}${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}

const DAY_MS = 86_400_000;
const LAST_FOUR_DIGIT_YEAR_MS = Date.UTC(10000, 0, 1);
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
/** The "YYYY-MM-DDT" of a day, by its number since the epoch ("2026-11-25T"). */
const dateOfDay = memoised(4096, (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 11));

export function toIso(ms: number | string | null | undefined): string | null {
  return ms === null || ms === undefined ? null : toIsoRequired(ms);
}
