/**
 * What the chat window reports, as the service keeps it (server/visitors/context-rules.ts):
 * addresses stripped of fragments (and queries, unless the site keeps them), user agents parsed
 * by bowser, languages and time zones checked, attributes bounded, and the current visit cut at
 * the first long pause.
 */
import {
  checkAttributes,
  checkLanguage,
  checkTimeZone,
  cleanText,
  currentVisit,
  decodeAttribute,
  encodeAttribute,
  keptUrl,
  MAX_URL_LENGTH,
  parseUserAgent,
  VISIT_GAP_MS,
} from '../../server/visitors/context-rules';
import { ApiError } from '../../server/platform/errors';

describe('keptUrl', () => {
  test('drops the fragment always and the query unless the site keeps it', () => {
    const url = 'https://shop.example/cart?coupon=SECRET&email=a%40b.example#step-2';
    expect(keptUrl(url, false)).toBe('https://shop.example/cart');
    expect(keptUrl(url, true)).toBe('https://shop.example/cart?coupon=SECRET&email=a%40b.example');
    expect(keptUrl('https://shop.example/?#', false)).toBe('https://shop.example/');
    expect(keptUrl('http://localhost:5173/a/b?x=1', false)).toBe('http://localhost:5173/a/b');
  });

  test('drops a user name and password, and normalises the address', () => {
    expect(keptUrl('https://user:pass@Shop.Example:443/a/../b', false)).toBe('https://shop.example/b');
  });

  test('is null for anything but http(s), for text that is not an address, and beyond 2048 characters', () => {
    for (const bad of ['javascript:alert(1)', 'data:text/html,x', 'file:///etc/passwd', 'about:blank', 'not a url', '', null, undefined]) {
      expect(keptUrl(bad as string, true)).toBeNull();
    }
    const long = `https://shop.example/${'a'.repeat(MAX_URL_LENGTH)}`;
    expect(keptUrl(long, false)).toBeNull();
    // A long query that the stripping removes leaves an address short enough.
    expect(keptUrl(`https://shop.example/p?${'q'.repeat(MAX_URL_LENGTH)}`, false)).toBe('https://shop.example/p');
  });
});

test('cleanText removes controls and bidi overrides, collapses spaces, and cuts at whole characters', () => {
  expect(cleanText('  a\u0000b\u202Ec\n\td  ', 100)).toBe('a b c d');
  expect(cleanText('😀😀😀', 2)).toBe('😀😀');
});

describe('parseUserAgent', () => {
  test('names the browser and the operating system, and the kind of device', () => {
    expect(parseUserAgent('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36')).toEqual({
      browser: 'Chrome',
      browserVersion: '131.0.0.0',
      os: 'Linux',
      osVersion: null,
      device: 'desktop',
    });
    const iphone = parseUserAgent(
      'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
    );
    expect(iphone).toMatchObject({ browser: 'Safari', os: 'iOS', osVersion: '17.4', device: 'mobile' });
    const windows = parseUserAgent('Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0');
    expect(windows).toMatchObject({ browser: 'Firefox', os: 'Windows', osVersion: '10', device: 'desktop' });
  });

  test('gives nothing for a missing, unknown or oversized user agent', () => {
    const none = { browser: null, browserVersion: null, os: null, osVersion: null, device: null };
    expect(parseUserAgent(undefined)).toEqual(none);
    expect(parseUserAgent('x'.repeat(2000))).toEqual(none);
    expect(parseUserAgent('curl/8.5.0').os).toBeNull();
  });
});

test('checkTimeZone takes IANA zones the runtime knows, as named, and nothing else', () => {
  expect(checkTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
  expect(checkTimeZone('America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires');
  expect(checkTimeZone('UTC')).toBe('UTC');
  for (const bad of ['Mars/Olympus', 'Europe/Berlin; drop table', '', 'a'.repeat(65), undefined]) expect(checkTimeZone(bad)).toBeNull();
});

test('checkLanguage takes BCP 47 tags, canonical', () => {
  expect(checkLanguage('de-ch')).toBe('de-CH');
  expect(checkLanguage('en')).toBe('en');
  expect(checkLanguage('zh-Hant-TW')).toBe('zh-Hant-TW');
  for (const bad of ['english please', '12', '', 'x'.repeat(40), undefined]) expect(checkLanguage(bad)).toBeNull();
});

describe('checkAttributes', () => {
  const refused = (raw: unknown) => {
    try {
      checkAttributes(raw, '/body/attributes');
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      return (err as ApiError).details?.[0]?.path;
    }
    throw new Error('accepted');
  };

  test('takes up to 20 scalar values under plain names', () => {
    expect(checkAttributes({ plan: 'pro', 'company.size': 40, beta_user: true }, '/x')).toEqual([
      { name: 'plan', value: 'pro' },
      { name: 'company.size', value: 40 },
      { name: 'beta_user', value: true },
    ]);
    expect(checkAttributes(undefined, '/x')).toEqual([]);
  });

  test('refuses 21 attributes, nested values, non-finite numbers, long text and odd names, naming where', () => {
    expect(refused(Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i])))).toBe('/body/attributes');
    expect(refused({ a: { b: 1 } })).toBe('/body/attributes/a');
    expect(refused({ a: null })).toBe('/body/attributes/a');
    expect(refused({ a: Infinity })).toBe('/body/attributes/a');
    expect(refused({ a: 'x'.repeat(501) })).toBe('/body/attributes/a');
    expect(refused({ 'two words': 1 })).toBe('/body/attributes');
    expect(refused([1, 2])).toBe('/body/attributes');
  });

  test('are kept as a type and text, and read back as they were', () => {
    for (const v of ['text', '', 12.5, -3, 0, true, false]) {
      const { type, value } = encodeAttribute(v);
      expect(decodeAttribute(type, value)).toBe(v);
    }
    expect(encodeAttribute('42')).toEqual({ type: 'string', value: '42' });
  });
});

describe('currentVisit', () => {
  const at = (min: number) => Date.UTC(2026, 0, 1, 12, 0) + min * 60_000;
  const page = (url: string, min: number) => ({ url, title: null, referrer: null, viewedAt: at(min) });

  test('is the pages since the last pause longer than 30 minutes, each with the time until the next', () => {
    const pages = [page('/old', 0), page('/a', 60), page('/b', 62), page('/c', 62.5)];
    expect(currentVisit(pages).map((p) => [p.url, p.durationMs])).toEqual([
      ['/a', 120_000],
      ['/b', 30_000],
      ['/c', null],
    ]);
  });

  test('keeps a visit together across pauses up to the gap, and orders by time', () => {
    const pages = [page('/b', 30), page('/a', 0)];
    expect(currentVisit(pages).map((p) => p.url)).toEqual(['/a', '/b']);
    expect(currentVisit([page('/a', 0), { ...page('/b', 0), viewedAt: at(0) + VISIT_GAP_MS + 1 }]).map((p) => p.url)).toEqual(['/b']);
    expect(currentVisit([])).toEqual([]);
  });
});
