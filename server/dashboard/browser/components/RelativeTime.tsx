import { useEffect, useState } from 'preact/hooks';

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 86_400_000],
  ['month', 30 * 86_400_000],
  ['week', 7 * 86_400_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
];
const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });

/** "3 minutes ago", "yesterday": the largest whole unit; under a minute, "just now". */
export function relative(iso: string, now = Date.now()): string {
  const diff = Date.parse(iso) - now;
  for (const [unit, ms] of UNITS) if (Math.abs(diff) >= ms) return format.format(Math.round(diff / ms), unit);
  return 'just now';
}

let tick = Date.now();
const clocks = new Set<(n: number) => void>();
let timer: ReturnType<typeof setInterval> | undefined;

/** One timer for every RelativeTime on the page, once a minute. */
function useMinute(): number {
  const [now, set] = useState(tick);
  useEffect(() => {
    clocks.add(set);
    timer ??= setInterval(() => {
      tick = Date.now();
      for (const c of clocks) c(tick);
    }, 60_000);
    return () => {
      clocks.delete(set);
      if (!clocks.size && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    };
  }, []);
  return now;
}

/** A time as "5 minutes ago", with the exact time in the title and in `datetime`; `never` for null. */
export function RelativeTime({ at, never = 'never' }: { at: string | null; never?: string }) {
  const now = useMinute();
  if (!at) return <span class="muted">{never}</span>;
  return (
    <time dateTime={at} title={new Date(at).toLocaleString()}>
      {relative(at, Math.max(now, Date.now()))}
    </time>
  );
}
