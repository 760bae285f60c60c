import type { Request } from 'express';
import { ApiError } from '../platform/errors';

export const SESSION_COOKIE = '__Host-session';
/** Set at a successful sign-in: this browser signed in as the account before (accounts/throttle.ts). */
export const DEVICE_COOKIE = '__Host-device';

const CHANGES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Why a request that changes something must be refused as cross-site, or null. Fetch Metadata
 * first: browsers send `Sec-Fetch-Site`, and only `same-origin` passes (`same-site` is another
 * origin too: a sibling subdomain is not the dashboard). A client without Fetch Metadata passes
 * with an `Origin` equal to the service's; with neither header it is refused. A request with an
 * `Authorization` header carries no ambient credential (a cross-site page cannot set that header
 * without a CORS preflight, which this entry never allows), so it is not checked.
 */
export function crossSiteRefusal(req: Pick<Request, 'method' | 'headers'>, serviceOrigin: string): ApiError | null {
  if (!CHANGES.has(req.method)) return null;
  if (req.headers.authorization !== undefined) return null;
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined) {
    if (site === 'same-origin') return null;
    return new ApiError('cross_site_request', `A change from another site is refused (Sec-Fetch-Site: ${String(site).slice(0, 20)}).`);
  }
  const origin = req.headers.origin;
  if (origin === undefined)
    return new ApiError('cross_site_request', "A change needs Sec-Fetch-Site: same-origin or this service's Origin; use a management token for scripts.");
  if (origin === serviceOrigin) return null;
  return new ApiError('cross_site_request', 'A change from another origin is refused.');
}

/** The value of cookie `name`, when the request carries exactly one. */
function cookieValueOf(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    if (found !== undefined) return undefined; // two: a sibling host may have planted one; trust neither
    found = part.slice(eq + 1).trim();
  }
  return found || undefined;
}

/** The session cookie's value, when the request carries exactly one. */
export const sessionCookieOf = (header: string | undefined) => cookieValueOf(header, SESSION_COOKIE);
/** The device cookie's value, when the request carries exactly one. */
export const deviceCookieOf = (header: string | undefined) => cookieValueOf(header, DEVICE_COOKIE);

/**
 * Long-lived, and Strict: it is only ever needed on the dashboard's own sign-in request, so no
 * cross-site navigation carries it; HttpOnly keeps it from page scripts.
 */
export function deviceCookie(value: string, maxAgeSeconds: number): string {
  return `${DEVICE_COOKIE}=${value}; Max-Age=${maxAgeSeconds}; Path=/; HttpOnly; Secure; SameSite=Strict`;
}

/** `__Host-` needs Secure, Path=/ and no Domain; HttpOnly keeps it from page scripts; Lax from cross-site subrequests. */
export function sessionCookie(token: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${token}; Max-Age=${maxAgeSeconds}; Path=/; HttpOnly; Secure; SameSite=Lax`;
}

export const clearedSessionCookie = () => sessionCookie('', 0);
