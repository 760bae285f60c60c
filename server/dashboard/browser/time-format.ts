/** How the dashboard writes times (components/RelativeTime.tsx): pure, for the unit tier. */

const DAY = 86_400_000;
/**
 * Relative up to a week away, a date beyond (as Intercom's inbox does): "3 hours ago" and "in 2
 * days" say how fresh something is, but "5 weeks ago" makes the reader count back, so older
 * times read "12 Mar" (with the year when it is not this one). The exact time is always on hover.
 */
export const RELATIVE_WITHIN_MS = 7 * DAY;

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['day', DAY],
  ['hour', 3_600_000],
  ['minute', 60_000],
];
const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });

/** "3 minutes ago", "yesterday", "in 2 days": the largest whole unit; under a minute, "just now". Pure, for the unit tier. */
export function relative(iso: string, now = Date.now()): string {
  const diff = Date.parse(iso) - now;
  for (const [unit, ms] of UNITS) if (Math.abs(diff) >= ms) return format.format(Math.round(diff / ms), unit);
  return 'just now';
}

/** What a time shows: relative within a week of `now`, else its date ("12 Mar", "12 Mar 2025"). */
export function shownTime(iso: string, now = Date.now(), locale?: string): string {
  const at = Date.parse(iso);
  if (Math.abs(at - now) < RELATIVE_WITHIN_MS) return relative(iso, now);
  const d = new Date(at);
  const sameYear = d.getFullYear() === new Date(now).getFullYear();
  return d.toLocaleDateString(locale, sameYear ? { day: 'numeric', month: 'short' } : { day: 'numeric', month: 'short', year: 'numeric' });
}

/** The exact time for a title: weekday, date, time and the reader's time zone. */
export function exactTime(iso: string, locale?: string): string {
  return new Date(iso).toLocaleString(locale, { dateStyle: 'full', timeStyle: 'long' });
}
