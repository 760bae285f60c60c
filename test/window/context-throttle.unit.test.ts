/**
 * The chat window's side of the visitor's context, without a browser: its throttle (a fake clock
 * and timers), the address stripping done before anything leaves the browser, and the report it
 * builds from what the loader says of the page.
 */
import { createThrottle, type ThrottleClock } from '../../server/window/browser/panel/throttle';
import { reportOf, strippedUrl, REPORT_INTERVAL_MS } from '../../server/window/browser/panel/context';

function fakeClock() {
  let now = 1_000_000;
  const timers = new Map<number, { at: number; fn: () => void }>();
  let next = 1;
  const clock: ThrottleClock = {
    now: () => now,
    setTimeout: (fn, ms) => {
      timers.set(next, { at: now + ms, fn });
      return next++;
    },
    clearTimeout: (h) => void timers.delete(h as number),
  };
  return {
    clock,
    pending: () => timers.size,
    /** Moves time on, running the timers that fall due, in order. */
    advance(ms: number) {
      const until = now + ms;
      for (;;) {
        const due = [...timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        now = due[1].at;
        due[1].fn();
      }
      now = until;
    },
  };
}

describe('createThrottle', () => {
  test('runs the first call at once, then at most one per interval, the newest of those asked for', () => {
    const t = fakeClock();
    const throttle = createThrottle(3000, t.clock);
    const ran: string[] = [];
    throttle.request(() => ran.push('a'));
    expect(ran).toEqual(['a']);
    // Three pages within the interval: one report at its end, of the newest.
    t.advance(500);
    throttle.request(() => ran.push('b'));
    t.advance(500);
    throttle.request(() => ran.push('c'));
    throttle.request(() => ran.push('d'));
    expect(ran).toEqual(['a']);
    expect(t.pending()).toBe(1);
    t.advance(1999);
    expect(ran).toEqual(['a']);
    t.advance(1);
    expect(ran).toEqual(['a', 'd']);
    // The next interval counts from that run.
    throttle.request(() => ran.push('e'));
    expect(ran).toEqual(['a', 'd']);
    t.advance(3000);
    expect(ran).toEqual(['a', 'd', 'e']);
    // After a quiet interval a call runs at once again.
    t.advance(10_000);
    throttle.request(() => ran.push('f'));
    expect(ran).toEqual(['a', 'd', 'e', 'f']);
  });

  test('bounds the calls by the interval however many are asked for', () => {
    const t = fakeClock();
    const throttle = createThrottle(REPORT_INTERVAL_MS, t.clock);
    let runs = 0;
    for (let i = 0; i < 1000; i++) {
      throttle.request(() => runs++);
      t.advance(10); // a page every 10 ms for 10 s
    }
    t.advance(REPORT_INTERVAL_MS);
    expect(runs).toBeLessThanOrEqual(Math.ceil(10_000 / REPORT_INTERVAL_MS) + 1);
    expect(runs).toBeGreaterThanOrEqual(Math.floor(10_000 / REPORT_INTERVAL_MS));
  });

  test('cancel drops what waits', () => {
    const t = fakeClock();
    const throttle = createThrottle(3000, t.clock);
    const ran: string[] = [];
    throttle.request(() => ran.push('a'));
    throttle.request(() => ran.push('b'));
    throttle.cancel();
    t.advance(5000);
    expect(ran).toEqual(['a']);
    expect(t.pending()).toBe(0);
  });
});

describe('what leaves the browser', () => {
  test('the address loses its fragment, credentials, and its query unless the site keeps it', () => {
    expect(strippedUrl('https://u:p@shop.example/cart?token=abc#pay', false)).toBe('https://shop.example/cart');
    expect(strippedUrl('https://shop.example/cart?token=abc#pay', true)).toBe('https://shop.example/cart?token=abc');
    expect(strippedUrl('file:///home/me/page.html', false)).toBe('');
    expect(strippedUrl('', false)).toBe('');
  });

  test('a report: stripped page and referrer, a title without controls, language and zone when well formed', () => {
    const settings = { pageTracking: true, keepQuery: false };
    const page = { url: 'https://shop.example/p?id=7#x', title: ' Shoes\u0007 ', referrer: 'https://search.example/?q=me' };
    expect(reportOf(page, settings, { language: 'de-CH', timeZone: 'Europe/Zurich' })).toEqual({
      page: { url: 'https://shop.example/p', title: 'Shoes', referrer: 'https://search.example/' },
      language: 'de-CH',
      timeZone: 'Europe/Zurich',
    });
    expect(reportOf({ ...page, title: '', referrer: '' }, settings, { language: 'not a tag', timeZone: undefined })).toEqual({
      page: { url: 'https://shop.example/p' },
    });
    expect(reportOf({ ...page, url: 'about:blank' }, settings, {})).toBeNull();
  });
});
