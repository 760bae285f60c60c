import { useEffect, useState } from 'preact/hooks';
import { exactTime, shownTime } from '../time-format';

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

/**
 * A time as "5 minutes ago" (a date when more than a week away), with the exact time and time zone
 * in the title and in `datetime`; `never` for null.
 */
export function RelativeTime({ at, never = 'never' }: { at: string | null; never?: string }) {
  const now = useMinute();
  if (!at) return <span class="muted">{never}</span>;
  return (
    <time dateTime={at} title={exactTime(at)}>
      {shownTime(at, Math.max(now, Date.now()))}
    </time>
  );
}
