/*
 * The chat window's credentials, both `<kind>.<base64url JSON payload>.<base64url HMAC-SHA256>`,
 * each kind with its own key derived from the master key, so one can never pass for the other:
 *
 * - the window token (`wwt1`): short-lived (WINDOW_TOKEN_TTL_SECONDS), carries the site, the
 *   visitor, the origin it was issued to (its audience), whether the visitor's identity was
 *   verified, and its issue and expiry times. Sent only as `Authorization: Bearer`, never in a URL.
 * - the visitor credential (`wvc1`): lets an anonymous visitor come back as itself. It names a
 *   site and a visitor id and opens nothing by itself: it is only exchanged at the gateway, from an
 *   allowed origin, for a window token. It is not an API key.
 */
import { createHmac } from 'node:crypto';
import { safeEqual } from '../platform/crypto';

export const WINDOW_TOKEN_TTL_SECONDS = 600;
export const VISITOR_CREDENTIAL_TTL_SECONDS = 180 * 24 * 3600;
/** Clock skew tolerated between instances for a token's issue time. */
const SKEW_MS = 60_000;

export interface WindowClaims {
  siteId: string;
  visitorId: string;
  origin: string;
  verified: boolean;
  issuedAt: number; // ms
  expiresAt: number; // ms
}

export interface VisitorClaims {
  siteId: string;
  visitorId: string;
  expiresAt: number; // ms
}

/** Why a presented credential was refused; the message is for people, the kind for tests and logs. */
export class TokenRefused extends Error {
  constructor(readonly reason: 'malformed' | 'signature' | 'expired' | 'site', message: string) {
    super(message);
  }
}

function signer(key: Buffer, kind: string) {
  const mac = (body: string) => createHmac('sha256', key).update(`${kind}.${body}`).digest('base64url');
  return {
    sign(payload: object): string {
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${kind}.${body}.${mac(body)}`;
    },
    /** The payload of an untampered credential of this kind, else TokenRefused. */
    open(text: string): Record<string, unknown> {
      if (typeof text !== 'string' || text.length > 2048) throw new TokenRefused('malformed', 'The token is malformed.');
      const parts = text.split('.');
      if (parts.length !== 3 || parts[0] !== kind || !/^[A-Za-z0-9_-]+$/.test(parts[1]) || !/^[A-Za-z0-9_-]+$/.test(parts[2])) {
        throw new TokenRefused('malformed', 'The token is malformed.');
      }
      if (!safeEqual(mac(parts[1]), parts[2])) throw new TokenRefused('signature', 'The token was not issued by this service or was altered.');
      try {
        const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
        if (payload && typeof payload === 'object' && !Array.isArray(payload)) return payload;
      } catch {
        // falls through: signed by us but unreadable cannot happen unless the key leaked
      }
      throw new TokenRefused('malformed', 'The token is malformed.');
    },
  };
}

export function createWindowTokens(keys: { windowTokens: Buffer; visitorCredentials: Buffer }, now: () => number = Date.now) {
  const tokens = signer(keys.windowTokens, 'wwt1');
  const visitors = signer(keys.visitorCredentials, 'wvc1');
  return {
    issue(claims: Omit<WindowClaims, 'issuedAt' | 'expiresAt'>, ttlSeconds = WINDOW_TOKEN_TTL_SECONDS): { token: string; claims: WindowClaims } {
      const at = now();
      const full: WindowClaims = { ...claims, issuedAt: at, expiresAt: at + ttlSeconds * 1000 };
      const token = tokens.sign({ s: full.siteId, v: full.visitorId, o: full.origin, vf: full.verified, iat: full.issuedAt, exp: full.expiresAt });
      return { token, claims: full };
    },

    /** The claims of a valid, unexpired token for `siteId`; TokenRefused otherwise. */
    verify(token: string, siteId: string): WindowClaims {
      const p = tokens.open(token);
      if (typeof p.s !== 'string' || typeof p.v !== 'string' || typeof p.o !== 'string' || typeof p.vf !== 'boolean' || typeof p.iat !== 'number' || typeof p.exp !== 'number') {
        throw new TokenRefused('malformed', 'The token is malformed.');
      }
      const at = now();
      if (p.exp <= at || p.iat > at + SKEW_MS) throw new TokenRefused('expired', 'The window token has expired; get a new one from the gateway.');
      if (p.s !== siteId) throw new TokenRefused('site', 'The window token was issued for another site.');
      return { siteId: p.s, visitorId: p.v, origin: p.o, verified: p.vf, issuedAt: p.iat, expiresAt: p.exp };
    },

    issueVisitorCredential(siteId: string, visitorId: string): string {
      return visitors.sign({ s: siteId, v: visitorId, exp: now() + VISITOR_CREDENTIAL_TTL_SECONDS * 1000 });
    },

    verifyVisitorCredential(credential: string, siteId: string): VisitorClaims {
      const p = visitors.open(credential);
      if (typeof p.s !== 'string' || typeof p.v !== 'string' || typeof p.exp !== 'number') throw new TokenRefused('malformed', 'The visitor credential is malformed.');
      if (p.exp <= now()) throw new TokenRefused('expired', 'The visitor credential has expired; start without it as a new visitor.');
      if (p.s !== siteId) throw new TokenRefused('site', 'The visitor credential belongs to another site.');
      return { siteId: p.s, visitorId: p.v, expiresAt: p.exp };
    },
  };
}

export type WindowTokens = ReturnType<typeof createWindowTokens>;

/** The hash a customer's server computes for a signed-in user: hex HMAC-SHA256(site identity secret, userId). */
export function identityHash(secret: string, userId: string): string {
  return createHmac('sha256', secret).update(userId, 'utf8').digest('hex');
}

/** Constant-time check of a presented hash (hex, either case). */
export function identityHashMatches(secret: string, userId: string, presented: string): boolean {
  return safeEqual(identityHash(secret, userId), presented.toLowerCase());
}

/** A verified visitor's id: the same on every device, and apart from the gateway's anonymous `vis_` ids. */
export const verifiedVisitorId = (userId: string) => `user:${userId}`;
