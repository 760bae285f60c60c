import { invalid, type ErrorDetail } from '../platform/errors';

/**
 * A site's business hours (docs/window.md, "Away"): pure rules, the clock passed in. A week of
 * opening ranges in the site's IANA time zone, each within one day (a night shift is two ranges:
 * `22:00-24:00` and the next day's `00:00-06:00`), so a range never depends on which day's offset
 * applies. Wall times are compared in the zone, so DST changes move the instants, not the hours.
 */

export const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Day = (typeof DAYS)[number];
/** `["09:00", "17:30"]`: from the first minute included to the second excluded; `24:00` ends the day. */
export type Range = [string, string];
export type Week = Record<Day, Range[]>;

export interface BusinessHours {
  enabled: boolean;
  timeZone: string;
  week: Week;
  awayMessage: string | null;
  /** Away while no member has the inbox open, inside the hours too; off for a site that answers through the API. */
  awayWhenNoAgentOnline: boolean;
}

/** What an owner sends: the switch may be left out (kept as it is). */
export type HoursChange = Omit<BusinessHours, 'awayWhenNoAgentOnline'> & { awayWhenNoAgentOnline?: boolean };

/** A site never set: no hours (always open), so only agents' presence decides. */
export const DEFAULT_BUSINESS_HOURS: BusinessHours = {
  enabled: false,
  timeZone: 'UTC',
  week: { mon: [], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] },
  awayMessage: null,
  awayWhenNoAgentOnline: true,
};

export const MAX_RANGES_PER_DAY = 6;
export const MAX_AWAY_MESSAGE = 1000;
const TIME = /^([01]\d|2[0-3]):([0-5]\d)$|^24:00$/;

const minutesOf = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/** An IANA zone the runtime knows (`Europe/Berlin`), or null. */
export function checkZone(raw: unknown): string | null {
  if (typeof raw !== 'string' || !/^[A-Za-z0-9_+/-]{1,64}$/.test(raw)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: raw }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** The hours an owner sent, checked: a known zone, ranges `HH:MM` ascending within a day, not overlapping. Throws a 400 listing each problem. */
export function checkBusinessHours(input: BusinessHours): BusinessHours {
  const problems: ErrorDetail[] = [];
  const timeZone = checkZone(input.timeZone);
  if (!timeZone) problems.push({ path: '/body/timeZone', message: 'not an IANA time zone (for example Europe/Berlin)' });
  const week = {} as Week;
  for (const day of DAYS) {
    const ranges = [...(input.week[day] ?? [])];
    ranges.sort((a, b) => minutesOf(a[0] ?? '') - minutesOf(b[0] ?? ''));
    ranges.forEach(([from, to], i) => {
      const path = `/body/week/${day}/${i}`;
      if (!TIME.test(from) || from === '24:00' || !TIME.test(to)) problems.push({ path, message: 'times are HH:MM, from 00:00 to 24:00' });
      else if (minutesOf(to) <= minutesOf(from)) problems.push({ path, message: 'a range ends after it starts (split a night into two days)' });
      else if (i > 0 && minutesOf(from) < minutesOf(ranges[i - 1][1])) problems.push({ path, message: 'ranges of a day must not overlap' });
    });
    week[day] = ranges;
  }
  const awayMessage = input.awayMessage?.trim() || null;
  if (problems.length) throw invalid('The business hours are not valid.', problems);
  return { enabled: input.enabled, timeZone: timeZone!, week, awayMessage, awayWhenNoAgentOnline: input.awayWhenNoAgentOnline };
}

interface Local {
  year: number;
  month: number;
  day: number;
  weekday: Day;
  minute: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      weekday: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The wall clock of `at` in the zone. */
export function localTime(at: number, timeZone: string): Local {
  const parts: Record<string, string> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(at))) parts[p.type] = p.value;
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    weekday: parts.weekday.toLowerCase().slice(0, 3) as Day,
    minute: Number(parts.hour) * 60 + Number(parts.minute),
  };
}

/** Whether `at` falls inside the hours. Hours turned off are always open. */
export function isOpen(hours: BusinessHours, at: number): boolean {
  if (!hours.enabled) return true;
  const local = localTime(at, hours.timeZone);
  return hours.week[local.weekday].some(([from, to]) => local.minute >= minutesOf(from) && local.minute < minutesOf(to));
}

const localKey = (l: Pick<Local, 'year' | 'month' | 'day' | 'minute'>) => ((l.year * 13 + l.month) * 32 + l.day) * 1440 + l.minute;

/**
 * The first instant whose wall clock in the zone is at or after the given wall time: the earlier
 * one when the time occurs twice (autumn), the moment of the jump when it does not occur (spring).
 */
export function instantOf(wall: { year: number; month: number; day: number; minute: number }, timeZone: string): number {
  const naive = Date.UTC(wall.year, wall.month - 1, wall.day) + wall.minute * 60_000;
  const want = localKey(wall);
  const offsetAt = (t: number) => {
    const l = localTime(t, timeZone);
    return Date.UTC(l.year, l.month - 1, l.day) + l.minute * 60_000 - Math.floor(t / 60_000) * 60_000;
  };
  const candidates = [naive - offsetAt(naive - 86_400_000), naive - offsetAt(naive + 86_400_000)].sort((a, b) => a - b);
  const exact = candidates.find((t) => localKey(localTime(t, timeZone)) === want);
  if (exact !== undefined) return exact;
  // In a gap: the first minute between the two readings whose wall clock is past the wanted one.
  let [lo, hi] = candidates;
  while (hi - lo > 60_000) {
    const mid = lo + Math.floor((hi - lo) / 120_000) * 60_000;
    if (localKey(localTime(mid, timeZone)) >= want) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * When the hours next open after `at` (within the coming eight days), or null when the week has
 * no hours; `at` itself when they are open now.
 */
export function nextOpening(hours: BusinessHours, at: number): number | null {
  if (isOpen(hours, at)) return at;
  const today = localTime(at, hours.timeZone);
  for (let d = 0; d <= 7; d++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + d));
    const weekday = DAYS[(date.getUTCDay() + 6) % 7];
    for (const [from] of hours.week[weekday]) {
      const t = instantOf({ year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate(), minute: minutesOf(from) }, hours.timeZone);
      if (t > at) return t;
    }
  }
  return null;
}
