/**
 * The arithmetic of visitor-file quotas, without a database or a server: sliding-window budgets
 * (per client IP), a site's day and stored quotas, what a body may carry before it is read,
 * allowed types, the types media is served with, and stored file names.
 */
import fc from 'fast-check';
import { EMPTY_COUNTS, secondsUntilFits, spend, used, refunded, WindowCounts } from '../../server/http/rate-limit/window';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';
import {
  chargeSite,
  DAY_MS,
  expectedFileBytes,
  HOUR_MS,
  MULTIPART_TEXT_ALLOWANCE,
  NO_USAGE,
  nextGrant,
  parseTypePatterns,
  released,
  secondsUntilNextUtcDay,
  siteRoom,
  typeAllowed,
  utcDay,
  VisitorFileLimits,
} from '../../server/media/quota';
import { OPAQUE_TYPE, servedContentType } from '../../server/media/inert';
import { safeFileName } from '../../server/media/service';

const T0 = Date.UTC(2026, 0, 15, 10, 0, 0); // on an hour boundary

describe('sliding-window budgets', () => {
  test('amounts are taken while they fit, and refused past the limit', () => {
    let counts: WindowCounts = EMPTY_COUNTS;
    const take = (amount: number, at = T0) => {
      const d = spend(counts, amount, 100, at, HOUR_MS);
      counts = d.counts;
      return d;
    };
    expect(take(60)).toMatchObject({ allowed: true, used: 60, retryAfterSeconds: 0 });
    expect(take(40)).toMatchObject({ allowed: true, used: 100 });
    const refused = take(1);
    expect(refused).toMatchObject({ allowed: false, used: 100 });
    expect(counts.current).toBe(100); // a refusal takes nothing
    // Nothing leaves before the window ends (the previous window held nothing), then it shrinks linearly.
    expect(refused.retryAfterSeconds).toBe(3600 + 36);
  });

  test("the previous window's count weighs by how much of it the sliding window still covers", () => {
    const counts = { index: Math.floor(T0 / HOUR_MS) - 1, previous: 0, current: 80 };
    expect(used(counts, T0, HOUR_MS)).toBe(80); // at the boundary the whole previous window is inside
    expect(used(counts, T0 + HOUR_MS / 4, HOUR_MS)).toBe(60);
    expect(used(counts, T0 + HOUR_MS / 2, HOUR_MS)).toBe(40);
    expect(used(counts, T0 + HOUR_MS - 1, HOUR_MS)).toBe(1); // rounded up: never under-counted
    expect(used(counts, T0 + HOUR_MS, HOUR_MS)).toBe(0);
    expect(used(counts, T0 + 5 * HOUR_MS, HOUR_MS)).toBe(0);
    // Half an hour in, 40 of 100 are left, so 60 fit and 61 do not.
    expect(spend(counts, 60, 100, T0 + HOUR_MS / 2, HOUR_MS).allowed).toBe(true);
    expect(spend(counts, 61, 100, T0 + HOUR_MS / 2, HOUR_MS).allowed).toBe(false);
  });

  test('Retry-After lands where floating point puts the share a hair above the room (found by the property below)', () => {
    // 540 counted this hour, 433 wanted of 448: exactly 15 fit when 540's share is 15/540 of it.
    const counts = { index: Math.floor(T0 / HOUR_MS), previous: 0, current: 540 };
    const d = spend(counts, 433, 448, T0, HOUR_MS);
    expect(d.allowed).toBe(false);
    expect(spend(counts, 433, 448, T0 + d.retryAfterSeconds * 1000, HOUR_MS).allowed).toBe(true);
    expect(spend(counts, 433, 448, T0 + (d.retryAfterSeconds - 1) * 1000, HOUR_MS).allowed).toBe(false);
  });

  test('Retry-After is exact: the amount fits then, and not a second earlier', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: HOUR_MS - 1 }),
        (limit, previous, current, amount, offset) => {
          const now = T0 + offset;
          const counts = { index: Math.floor(now / HOUR_MS), previous, current };
          const d = spend(counts, amount, limit, now, HOUR_MS);
          if (d.allowed) return;
          expect(d.retryAfterSeconds).toBeGreaterThanOrEqual(1);
          if (amount > limit) return; // never fits: told to come back when nothing counted now is left
          expect(spend(counts, amount, limit, now + d.retryAfterSeconds * 1000, HOUR_MS).allowed).toBe(true);
          if (d.retryAfterSeconds > 1) expect(spend(counts, amount, limit, now + (d.retryAfterSeconds - 1) * 1000 - 1, HOUR_MS).allowed).toBe(false);
        },
      ),
      { numRuns: 2000 },
    );
  });

  test('an amount over the whole limit waits two windows', () => {
    expect(secondsUntilFits(EMPTY_COUNTS, 101, 100, T0, HOUR_MS)).toBe(7200);
  });

  test('a refund gives back to the window it was taken from, never below zero', () => {
    const index = Math.floor(T0 / HOUR_MS);
    const counts = { index, previous: 10, current: 50 };
    expect(refunded(counts, index, 20)).toEqual({ index, previous: 10, current: 30 });
    expect(refunded(counts, index, 80)).toEqual({ index, previous: 10, current: 0 });
    expect(refunded(counts, index - 1, 5)).toEqual({ index, previous: 5, current: 50 });
    expect(refunded(counts, index - 5, 5)).toBe(counts);
  });

  test('the in-process limiter spends, refuses with Retry-After, and takes refunds', async () => {
    let now = T0;
    const limiter = createMemoryLimiter(300, () => now);
    const a = await limiter.spend('visitor-file-bytes:ip:198.51.100.7', 700, 1000, HOUR_MS);
    expect(a).toMatchObject({ allowed: true, used: 700 });
    const b = await limiter.spend('visitor-file-bytes:ip:198.51.100.7', 400, 1000, HOUR_MS);
    expect(b).toMatchObject({ allowed: false, used: 700 });
    expect(b.retryAfterSeconds).toBeGreaterThan(3600);
    expect((await limiter.spend('visitor-file-bytes:ip:198.51.100.8', 400, 1000, HOUR_MS)).allowed).toBe(true); // another client IP
    await a.refund(300);
    await a.refund(10_000); // at most what was taken, in total
    expect((await limiter.spend('visitor-file-bytes:ip:198.51.100.7', 1000, 1000, HOUR_MS)).allowed).toBe(true);
    now += 2 * HOUR_MS;
    expect((await limiter.spend('visitor-file-bytes:ip:198.51.100.7', 1000, 1000, HOUR_MS)).used).toBe(1000);
  });
});

describe("a site's quotas", () => {
  const limits: VisitorFileLimits = { messagesPerHourPerClientIp: 0, bytesPerHourPerClientIp: 0, bytesPerDayPerSite: 1000, storedBytesPerSite: 3000 };

  test('bytes count against the UTC day and the stored total; a new day starts from zero', () => {
    const first = chargeSite(NO_USAGE, 600, limits, T0);
    expect(first).toEqual({ allowed: true, usage: { storedBytes: 600, day: utcDay(T0), dayBytes: 600 } });
    if (!first.allowed) throw new Error('unreachable');
    expect(chargeSite(first.usage, 401, limits, T0)).toEqual({ allowed: false, quota: 'day' });
    expect(chargeSite(first.usage, 400, limits, T0).allowed).toBe(true);
    const nextDay = chargeSite(first.usage, 1000, limits, T0 + DAY_MS);
    expect(nextDay).toEqual({ allowed: true, usage: { storedBytes: 1600, day: utcDay(T0) + 1, dayBytes: 1000 } });
  });

  test('the stored total binds across days until files are released', () => {
    const usage = { storedBytes: 2800, day: utcDay(T0) - 3, dayBytes: 900 };
    expect(chargeSite(usage, 300, limits, T0)).toEqual({ allowed: false, quota: 'stored' });
    expect(siteRoom(usage, limits, T0)).toEqual({ bytes: 200, binding: 'stored' });
    expect(chargeSite(released(usage, 500), 300, limits, T0).allowed).toBe(true);
    expect(released(usage, 99_999).storedBytes).toBe(0);
  });

  test('the room is the tighter quota; 0 turns a quota off', () => {
    expect(siteRoom({ storedBytes: 0, day: utcDay(T0), dayBytes: 250 }, limits, T0)).toEqual({ bytes: 750, binding: 'day' });
    expect(siteRoom({ storedBytes: 0, day: utcDay(T0) - 1, dayBytes: 999 }, limits, T0)).toEqual({ bytes: 1000, binding: 'day' });
    const off = { ...limits, bytesPerDayPerSite: 0, storedBytesPerSite: 0 };
    expect(siteRoom({ storedBytes: 1e12, day: utcDay(T0), dayBytes: 1e12 }, off, T0)).toEqual({ bytes: Infinity, binding: null });
    expect(chargeSite({ storedBytes: 1e12, day: utcDay(T0), dayBytes: 1e12 }, 1e9, off, T0).allowed).toBe(true);
    expect(siteRoom(NO_USAGE, { ...limits, bytesPerDayPerSite: 0 }, T0)).toEqual({ bytes: 3000, binding: 'stored' });
  });

  test('the day quota has room again at the next UTC midnight', () => {
    expect(secondsUntilNextUtcDay(T0)).toBe(14 * 3600);
    expect(secondsUntilNextUtcDay(Date.UTC(2026, 0, 15, 23, 59, 59, 500))).toBe(1);
  });
});

describe('before the body is read', () => {
  test('a body is expected to carry all but the text allowance as file bytes; unknown length is counted as it comes', () => {
    expect(expectedFileBytes(undefined)).toBe(0);
    expect(expectedFileBytes(2000)).toBe(0);
    expect(expectedFileBytes(MULTIPART_TEXT_ALLOWANCE + 5)).toBe(5);
    expect(expectedFileBytes(20 * 1024 * 1024)).toBe(20 * 1024 * 1024 - MULTIPART_TEXT_ALLOWANCE);
  });

  test('an upload past its grant asks for what it needs, and at least one step', () => {
    expect(nextGrant(100, 0, 1024)).toBe(1024);
    expect(nextGrant(5000, 1000, 1024)).toBe(4000);
  });
});

describe("a site's allowed types", () => {
  test('patterns are type/subtype or type/*, lowercase, without duplicates; empty, any or */* allow every type', () => {
    expect(parseTypePatterns('image/*, Application/PDF,image/*')).toEqual(['image/*', 'application/pdf']);
    expect(parseTypePatterns('')).toBeNull();
    expect(parseTypePatterns('any')).toBeNull();
    expect(parseTypePatterns('image/png,*/*')).toBeNull();
    for (const bad of ['image', '*/png', 'image/png;q=1', 'text/html,<script>', 'a/b/c'])
      expect(() => parseTypePatterns(bad)).toThrow(/not a file type pattern/);
    expect(() => parseTypePatterns(Array.from({ length: 21 }, (_, i) => `a/t${i}`).join(','))).toThrow(/At most 20/);
  });

  test('a type matches exactly or by its major type', () => {
    const patterns = ['image/*', 'application/pdf'];
    expect(typeAllowed(patterns, 'image/png')).toBe(true);
    expect(typeAllowed(patterns, 'IMAGE/JPEG')).toBe(true);
    expect(typeAllowed(patterns, 'application/pdf')).toBe(true);
    expect(typeAllowed(patterns, 'application/pdfx')).toBe(false);
    expect(typeAllowed(patterns, 'text/plain')).toBe(false);
    expect(typeAllowed(patterns, 'imagex/png')).toBe(false);
    expect(typeAllowed(null, 'text/html')).toBe(true);
  });
});

describe('the type media is served with', () => {
  test('anything a browser could run or render as a document goes out as octet-stream', () => {
    const active = [
      'text/javascript',
      'application/javascript',
      'application/x-javascript',
      'text/ecmascript',
      'application/ecmascript',
      'text/jscript',
      'text/livescript',
      'application/x-ecmascript',
      'text/javascript1.5',
      'module/javascript',
      'application/wasm',
      'text/html',
      'application/xhtml+xml',
      'image/svg+xml',
      'text/xml',
      'application/xml',
      'application/rss+xml',
      'text/css',
      'text/xsl',
      'application/json',
      'application/manifest+json',
      'text/vtt',
      'multipart/x-mixed-replace',
      'audio/x+xml',
      'video/xml',
      'application/x-shockwave-flash',
      'application/java-archive',
      'made/up',
    ];
    for (const type of active) expect([type, servedContentType(type)]).toEqual([type, OPAQUE_TYPE]);
  });

  test('inert types keep their type', () => {
    const inert = [
      'image/png',
      'image/jpeg',
      'image/gif',
      'image/webp',
      'application/pdf',
      'text/plain',
      'text/csv',
      'audio/mpeg',
      'video/mp4',
      'application/zip',
      'application/octet-stream',
      'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
      'application/vnd.oasis.opendocument.text',
      'application/msword',
    ];
    for (const type of inert) expect(servedContentType(type)).toBe(type);
    expect(servedContentType('IMAGE/PNG')).toBe('image/png');
  });
});

describe('stored file names', () => {
  test('bidi controls are stripped, so a name reads as what it is', () => {
    expect(safeFileName('invoice\u202Efdp.exe')).toBe('invoicefdp.exe');
    const bidi = ['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u061C'];
    for (const c of bidi) expect(safeFileName(`a${c}b.pdf`)).toBe('ab.pdf');
  });

  test('other control and format characters, line and paragraph separators and lone surrogates go too', () => {
    const invisible = [
      '\u0000',
      '\u0007',
      '\n',
      '\r',
      '\u001F',
      '\u007F',
      '\u0085',
      '\u009F',
      '\u00AD',
      '\u200B',
      '\u2060',
      '\uFEFF',
      '\u2028',
      '\u2029',
      '\uD800',
      '\uDFFF',
      '\u{E0001}',
    ];
    for (const c of invisible) expect([JSON.stringify(c), safeFileName(`re${c}port.txt`)]).toEqual([JSON.stringify(c), 'report.txt']);
    expect(safeFileName('\u202E\u202E')).toBe('file');
    expect(safeFileName('\u202E..\u202Ehidden')).toBe('hidden');
  });

  test('every name that comes out is free of them, readable characters stay', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (name) => {
        const safe = safeFileName(name);
        expect(safe).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}"\\/<>:|?*]/u);
        expect(Array.from(safe).length).toBeGreaterThan(0);
        expect(Array.from(safe).length).toBeLessThanOrEqual(200);
      }),
      { numRuns: 2000 },
    );
    expect(safeFileName('Ünïcode "photo" 📷 عربي.png')).toBe('Ünïcode _photo_ 📷 عربي.png');
  });
});
