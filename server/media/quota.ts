/**
 * The arithmetic of visitor-file quotas (docs/window.md, Visitor files), pure and with the clock passed in:
 * a site's bytes of the current UTC day and bytes stored, what a request may still upload, and the
 * site's allowed types. The per-client-IP budgets are sliding windows (http/rate-limit/window.ts).
 */
import { invalid } from '../platform/errors';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The operator's limits (config.ts); 0 turns a limit off. */
export interface VisitorFileLimits {
  /** Messages from one client IP an hour, over all its visitors and sites. */
  messagesPerHourPerClientIp: number;
  /** File bytes received from one client IP an hour, over all its visitors and sites. */
  bytesPerHourPerClientIp: number;
  /** File bytes a site stores from its visitors in one UTC day. */
  bytesPerDayPerSite: number;
  /** File bytes of a site's visitors stored at once (retention frees them). */
  storedBytesPerSite: number;
}

/** A site's counters (table site_visitor_files): bytes stored, and bytes of UTC day `day`. */
export interface SiteUsage {
  storedBytes: number;
  day: number;
  dayBytes: number;
}

export type SiteQuota = 'day' | 'stored';

export const NO_USAGE: SiteUsage = { storedBytes: 0, day: 0, dayBytes: 0 };

/** A limit as a number to compare with: 0 (off) is no limit. */
export const limitOf = (limit: number) => (limit > 0 ? limit : Infinity);

export const utcDay = (now: number) => Math.floor(now / DAY_MS);

/** Whole seconds until the next UTC midnight, when a site's day quota starts again (at least 1). */
export const secondsUntilNextUtcDay = (now: number) => Math.max(1, Math.ceil(((utcDay(now) + 1) * DAY_MS - now) / 1000));

/** The usage as of `now`: a counter of an earlier day counts nothing today. */
export function usageOn(usage: SiteUsage, now: number): SiteUsage {
  const day = utcDay(now);
  return usage.day === day ? usage : { storedBytes: usage.storedBytes, day, dayBytes: 0 };
}

/** How many more bytes the site may take now, and which quota is the tighter (null: no limit). */
export function siteRoom(usage: SiteUsage, limits: VisitorFileLimits, now: number): { bytes: number; binding: SiteQuota | null } {
  const today = usageOn(usage, now);
  const day = Math.max(0, limitOf(limits.bytesPerDayPerSite) - today.dayBytes);
  const stored = Math.max(0, limitOf(limits.storedBytesPerSite) - today.storedBytes);
  if (day === Infinity && stored === Infinity) return { bytes: Infinity, binding: null };
  return day < stored ? { bytes: day, binding: 'day' } : { bytes: stored, binding: 'stored' };
}

export type SiteCharge = { allowed: true; usage: SiteUsage } | { allowed: false; quota: SiteQuota };

/** Adds `bytes` to the site's counters when both quotas have room for them. */
export function chargeSite(usage: SiteUsage, bytes: number, limits: VisitorFileLimits, now: number): SiteCharge {
  const today = usageOn(usage, now);
  if (today.storedBytes + bytes > limitOf(limits.storedBytesPerSite)) return { allowed: false, quota: 'stored' };
  if (today.dayBytes + bytes > limitOf(limits.bytesPerDayPerSite)) return { allowed: false, quota: 'day' };
  return { allowed: true, usage: { storedBytes: today.storedBytes + bytes, day: today.day, dayBytes: today.dayBytes + bytes } };
}

/** Files removed (retention): their bytes leave the stored total; the day's count stays what it received. */
export const released = (usage: SiteUsage, bytes: number): SiteUsage => ({ ...usage, storedBytes: Math.max(0, usage.storedBytes - bytes) });

/**
 * Room in a multipart body for what is not a file: the message text (10,000 characters, at most
 * 40,000 bytes of UTF-8), the other fields and every part's headers and boundaries.
 */
export const MULTIPART_TEXT_ALLOWANCE = 64 * 1024;

/**
 * The file bytes a body of `contentLength` bytes will most likely carry, known before a byte of it
 * is read: everything but the text allowance. Unknown (chunked) is 0; the bytes are then counted
 * as they arrive.
 */
export function expectedFileBytes(contentLength: number | undefined): number {
  return contentLength === undefined ? 0 : Math.max(0, contentLength - MULTIPART_TEXT_ALLOWANCE);
}

/** The budget a request asks for when it has used what it was granted: the whole need, and at least `step`. */
export const nextGrant = (total: number, granted: number, step: number) => Math.max(total - granted, step);

const TYPE_PATTERN = /^(\*\/\*|[a-z0-9!#$&^_.+-]+\/(\*|[a-z0-9!#$&^_.+-]+))$/;
export const MAX_TYPE_PATTERNS = 20;

/**
 * A site's allowed visitor-file types from the CLI (`image/*,application/pdf`): each `type/subtype`,
 * `type/*` or `*\/*`, lowercase, duplicates dropped. Empty or `any` allows every type (null).
 */
export function parseTypePatterns(text: string): string[] | null {
  const list = [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean),
    ),
  ];
  if (list.length === 0 || (list.length === 1 && list[0] === 'any')) return null;
  if (list.length > MAX_TYPE_PATTERNS) throw invalid(`At most ${MAX_TYPE_PATTERNS} file types a site.`);
  for (const p of list) {
    if (p.length > 100 || !TYPE_PATTERN.test(p))
      throw invalid(`"${p}" is not a file type pattern: write type/subtype or type/*, e.g. image/*,application/pdf.`);
  }
  return list.includes('*/*') ? null : list;
}

/** Whether a file of (normalised) type `mime` is allowed by `patterns` (null: any type). */
export function typeAllowed(patterns: readonly string[] | null, mime: string): boolean {
  if (patterns === null) return true;
  const type = mime.toLowerCase();
  const major = type.slice(0, type.indexOf('/') + 1);
  return patterns.some((p) => p === type || (p.endsWith('/*') && p.slice(0, -1) === major));
}
