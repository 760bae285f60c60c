/*
 * The chat window's credentials, both `<kind>.<base64url JSON payload>.<base64url HMAC-SHA256>`,
 * each kind with its own key derived from the master key, so one can never pass for the other:
 *
 * - the window token (`wwt1`): short-lived (WINDOW_TOKEN_TTL_SECONDS), carries the site, the
 *   visitor, the origin it was issued to (its audience), whether the visitor's identity was
 *   verified and by which generation of the site's identity secret, when its session began at the
 *   gateway (a refresh keeps it: a session lasts at most WINDOW_SESSION_MAX_SECONDS), and its issue
 *   and expiry times. Sent only as `Authorization: Bearer`, never in a URL.
 * - the visitor credential (`wvc1`): lets an anonymous visitor come back as itself. It names a
 *   site and a visitor id and opens nothing by itself: it is only exchanged at the gateway, from an
 *   allowed origin, for a window token. It is not an API key. Its issue time lets an operator void
 *   it (`visitor revoke`).
 */
import { createHmac } from 'node:crypto';
import { safeEqual } from '../platform/crypto';

export const WINDOW_TOKEN_TTL_SECONDS = 600;
export const VISITOR_CREDENTIAL_TTL_SECONDS = 180 * 24 * 3600;
/** A window session's whole life from the gateway call that began it, refreshes included (like a dashboard session). */
export const WINDOW_SESSION_MAX_SECONDS = 12 * 3600;
/** Clock skew tolerated between instances for a token's issue time. */
const SKEW_MS = 60_000;

export interface WindowClaims {
  siteId: string;
  visitorId: string;
  origin: string;
  verified: boolean;
  /** For a verified visitor, the generation of the site's identity secret that vouched for it; null otherwise. */
  identityGeneration: string | null;
  sessionStart: number; // ms: the gateway call that began the session
  issuedAt: number; // ms
  expiresAt: number; // ms
}

export interface VisitorClaims {
  siteId: string;
  visitorId: string;
  issuedAt: number; // ms
  expiresAt: number; // ms
}

/** Why a presented credential was refused; the message is for people, the kind for tests and logs. */
export class TokenRefused extends Error {
  constructor(
    readonly reason: 'malformed' | 'signature' | 'expired' | 'site',
    message: string,
  ) {
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
    /** A token for a new session (no `sessionStart`) or for the rest of one (a refresh); it never outlives its session. */
    issue(
      claims: Omit<WindowClaims, 'issuedAt' | 'expiresAt' | 'sessionStart'> & { sessionStart?: number },
      ttlSeconds = WINDOW_TOKEN_TTL_SECONDS,
    ): { token: string; claims: WindowClaims } {
      const at = now();
      // Never after the issue time, even if the wall clock stepped back since the session began.
      const sessionStart = Math.min(claims.sessionStart ?? at, at);
      const expiresAt = Math.min(at + ttlSeconds * 1000, sessionStart + WINDOW_SESSION_MAX_SECONDS * 1000);
      const full: WindowClaims = { ...claims, identityGeneration: claims.verified ? claims.identityGeneration : null, sessionStart, issuedAt: at, expiresAt };
      const token = tokens.sign({
        s: full.siteId,
        v: full.visitorId,
        o: full.origin,
        vf: full.verified,
        ig: full.identityGeneration,
        st: full.sessionStart,
        iat: full.issuedAt,
        exp: full.expiresAt,
      });
      return { token, claims: full };
    },

    /** The claims of a valid, unexpired token for `siteId`; TokenRefused otherwise. */
    verify(token: string, siteId: string): WindowClaims {
      const p = tokens.open(token);
      if (
        typeof p.s !== 'string' ||
        typeof p.v !== 'string' ||
        typeof p.o !== 'string' ||
        typeof p.vf !== 'boolean' ||
        typeof p.iat !== 'number' ||
        typeof p.exp !== 'number'
      ) {
        throw new TokenRefused('malformed', 'The token is malformed.');
      }
      // A verified token names the secret's generation and an anonymous one none; tokens made
      // before sessions had a start carry neither and are refused (the window goes back to the gateway).
      if (typeof p.st !== 'number' || p.st > p.iat || (p.vf ? typeof p.ig !== 'string' : p.ig !== null))
        throw new TokenRefused('malformed', 'The token is malformed.');
      const at = now();
      // Tokens never outlive their session (issue caps `exp`); this check names the reason.
      if (p.st + WINDOW_SESSION_MAX_SECONDS * 1000 <= at) {
        throw new TokenRefused(
          'expired',
          `The window session is over (a session lasts at most ${WINDOW_SESSION_MAX_SECONDS / 3600} hours); start again at the gateway.`,
        );
      }
      if (p.exp <= at || p.iat > at + SKEW_MS) throw new TokenRefused('expired', 'The window token has expired; get a new one from the gateway.');
      if (p.s !== siteId) throw new TokenRefused('site', 'The window token was issued for another site.');
      return {
        siteId: p.s,
        visitorId: p.v,
        origin: p.o,
        verified: p.vf,
        identityGeneration: p.ig as string | null,
        sessionStart: p.st,
        issuedAt: p.iat,
        expiresAt: p.exp,
      };
    },

    /**
     * `issuedAt` is the start of the session it comes from: a revocation voids what that session
     * hands out, also a credential renewed later by one of its refreshes.
     */
    issueVisitorCredential(siteId: string, visitorId: string, issuedAt: number): string {
      return visitors.sign({ s: siteId, v: visitorId, iat: issuedAt, exp: now() + VISITOR_CREDENTIAL_TTL_SECONDS * 1000 });
    },

    verifyVisitorCredential(credential: string, siteId: string): VisitorClaims {
      const p = visitors.open(credential);
      if (typeof p.s !== 'string' || typeof p.v !== 'string' || typeof p.exp !== 'number')
        throw new TokenRefused('malformed', 'The visitor credential is malformed.');
      if (p.exp <= now()) throw new TokenRefused('expired', 'The visitor credential has expired; start without it as a new visitor.');
      if (p.s !== siteId) throw new TokenRefused('site', 'The visitor credential belongs to another site.');
      // Credentials made before they carried an issue time were all made with the same lifetime.
      const issuedAt = typeof p.iat === 'number' ? p.iat : p.exp - VISITOR_CREDENTIAL_TTL_SECONDS * 1000;
      return { siteId: p.s, visitorId: p.v, issuedAt, expiresAt: p.exp };
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
