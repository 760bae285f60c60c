import Bowser from 'bowser';
import { invalid } from '../platform/errors';

/**
 * The rules of what the chat window reports about a visitor (docs/window.md, "What the window
 * collects"), as pure functions: which part of an address is kept, how a user agent becomes a
 * browser and an operating system, which language and time zone are taken, what an identity's
 * attributes may be, and which pages make the current visit. No clock, no database.
 */

export const MAX_URL_LENGTH = 2048;
export const MAX_TITLE_LENGTH = 300;
/** Pages kept per conversation: the oldest go first. */
export const MAX_PAGES_PER_CONVERSATION = 50;
/** A pause longer than this between two pages starts a new visit (Google Analytics' session rule). */
export const VISIT_GAP_MS = 30 * 60_000;
export const MAX_ATTRIBUTES = 20;
export const MAX_ATTRIBUTE_STRING = 500;
export const ATTRIBUTE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

// C0 and C1 controls, and the format characters that reorder or hide text (bidi overrides,
// isolates, zero-width characters, the BOM): a title or a value never changes how the panel reads.
const UNSHOWN = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

/** Text as the panel shows it: unshown characters out, spaces collapsed, cut at `max` (whole code points). */
export function cleanText(raw: string, max: number): string {
  const text = raw.replace(UNSHOWN, ' ').replace(/\s+/g, ' ').trim();
  return [...text].slice(0, max).join('');
}

/**
 * A page's address as it is kept: http(s) only, never the fragment, the query only when the site
 * keeps it, no user name or password; null when it is not such an address or is too long.
 */
export function keptUrl(raw: string | null | undefined, keepQuery: boolean): string | null {
  if (typeof raw !== 'string' || raw === '' || raw.length > 8192) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  url.hash = '';
  url.username = '';
  url.password = '';
  if (!keepQuery) url.search = '';
  const kept = url.href;
  return kept.length <= MAX_URL_LENGTH ? kept : null;
}

export interface ParsedAgent {
  browser: string | null;
  browserVersion: string | null;
  os: string | null;
  osVersion: string | null;
  /** desktop, mobile, tablet, tv, bot (bowser's platform types). */
  device: string | null;
}

const cut = (v: string | undefined, max: number) => (v ? cleanText(v, max) || null : null);

/** Browser and operating system of a user agent, by bowser (a maintained parser); the user agent itself is not kept. */
export function parseUserAgent(ua: string | undefined): ParsedAgent {
  const none: ParsedAgent = { browser: null, browserVersion: null, os: null, osVersion: null, device: null };
  if (!ua || ua.length > 1024) return none;
  try {
    const parsed = Bowser.parse(ua);
    return {
      browser: cut(parsed.browser.name, 64),
      browserVersion: cut(parsed.browser.version, 32),
      os: cut(parsed.os.name, 64),
      osVersion: cut(parsed.os.versionName ?? parsed.os.version, 32),
      device: cut(parsed.platform.type, 16),
    };
  } catch {
    return none;
  }
}

/** An IANA time zone the runtime knows (`Europe/Berlin`), as the browser named it; null otherwise. */
export function checkTimeZone(raw: string | null | undefined): string | null {
  if (typeof raw !== 'string' || !/^[A-Za-z0-9_+/-]{1,64}$/.test(raw)) return null;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: raw });
    return raw;
  } catch {
    return null;
  }
}

/** A BCP 47 language tag (`de-CH`), canonical; null otherwise. */
export function checkLanguage(raw: string | null | undefined): string | null {
  if (typeof raw !== 'string' || !/^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8}){0,4}$/.test(raw) || raw.length > 35) return null;
  try {
    const [canonical] = Intl.getCanonicalLocales(raw);
    return canonical && canonical.length <= 35 ? canonical : null;
  } catch {
    return null;
  }
}

export type AttributeValue = string | number | boolean;

export interface Attribute {
  name: string;
  value: AttributeValue;
}

/**
 * An identity's custom attributes: an object of at most 20 names (letters, digits, `_ . -`, 1 to
 * 64) with scalar values (text up to 500 characters, a finite number, a boolean). Anything else is
 * a 400 naming what is wrong, under `path`.
 */
export function checkAttributes(raw: unknown, path: string): Attribute[] {
  if (raw === undefined) return [];
  const bad = (message: string, at = path) => invalid(`Visitor attributes: ${message}`, [{ path: at, message }]);
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw bad('an object of names and values');
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length > MAX_ATTRIBUTES) throw bad(`at most ${MAX_ATTRIBUTES} attributes`);
  return entries.map(([name, value]) => {
    if (!ATTRIBUTE_NAME.test(name)) throw bad('a name is 1 to 64 letters, digits, "_", "." or "-"');
    const at = `${path}/${name}`;
    if (typeof value === 'boolean') return { name, value };
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw bad('a number must be finite', at);
      return { name, value };
    }
    if (typeof value === 'string') {
      if ([...value].length > MAX_ATTRIBUTE_STRING) throw bad(`text is at most ${MAX_ATTRIBUTE_STRING} characters`, at);
      return { name, value: cleanText(value, MAX_ATTRIBUTE_STRING) };
    }
    throw bad('a value is text, a number or a boolean', at);
  });
}

/** A kept attribute's two columns, and back. */
export const encodeAttribute = (value: AttributeValue): { type: string; value: string } =>
  typeof value === 'string' ? { type: 'string', value } : { type: typeof value, value: JSON.stringify(value) };
export function decodeAttribute(type: string, value: string): AttributeValue {
  if (type === 'number') return Number(value);
  if (type === 'boolean') return value === 'true';
  return value;
}

export interface PageView {
  url: string;
  title: string | null;
  referrer: string | null;
  viewedAt: number;
}

/**
 * The pages of the visitor's current visit, oldest first: the last run of pages with no pause
 * longer than VISIT_GAP_MS between one and the next. Each has the time until the next one
 * (`durationMs`); the last, the page the visitor is on, has none.
 */
export function currentVisit<P extends PageView>(pages: readonly P[], gapMs = VISIT_GAP_MS): (P & { durationMs: number | null })[] {
  const sorted = [...pages].sort((a, b) => a.viewedAt - b.viewedAt);
  let start = 0;
  for (let i = 1; i < sorted.length; i++) if (sorted[i].viewedAt - sorted[i - 1].viewedAt > gapMs) start = i;
  const visit = sorted.slice(start);
  return visit.map((p, i) => ({ ...p, durationMs: i + 1 < visit.length ? visit[i + 1].viewedAt - p.viewedAt : null }));
}
