/*
 * The chat window's gateway rules: which origin a page proves, who a visitor is (anonymous with a
 * credential, or verified by the site's identity secret), whether a window token may still be
 * used (origin, revocation, identity mode and secret), and the tokens it hands out. The routes
 * (routes.ts) only parse the request, call these and reply. The decisions that need no database
 * are pure functions below, so they are tested without one.
 */
import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import type { AccessService } from '../access/service';
import type { components } from './generated/api';
import { identityHashMatches, TokenRefused, verifiedVisitorId, VisitorClaims, WindowClaims, WindowTokens } from './tokens';
import { claimedUserId, verifyIdentityToken, type IdentityClaims } from '../visitors/identity-token';

export type TokenRequest = components['schemas']['TokenRequest'];
export type TokenResponse = components['schemas']['TokenResponse'];

/** The site's window settings as one read gives them for an origin and a visitor. */
export type SiteWindowAccess = NonNullable<Awaited<ReturnType<AccessService['windowAccess']>>>;

/** The longest origin the gateway looks up (the document's `hostOrigin` bound). */
const MAX_ORIGIN_LENGTH = 300;

const GATEWAY_ORIGIN_REFUSED = "The gateway answers the site's own pages only: the request's Origin must be one of the site's allowed origins.";
export const ORIGIN_REFUSED = 'This origin may not use the chat window of this site.';

/** Why a valid token may not be used now, from the site's one read (null: it may). */
export function windowRefusal(site: SiteWindowAccess | null, claims: WindowClaims): string | null {
  if (!site) return 'No such site.';
  // The site's settings may have changed since the token was issued: they apply at once.
  if (!site.originAllowed) return 'The origin of this window token is no longer allowed for the site.';
  if (site.revokedBefore !== null && claims.sessionStart <= site.revokedBefore) return "This visitor's window access was revoked; start again at the gateway.";
  if (claims.verified) {
    if (site.identityMode === 'off') return 'This site no longer verifies identities; start again at the gateway.';
    if (claims.identityGeneration !== site.identityGeneration)
      return "The site's identity secret changed since this visitor was verified; verify again at the gateway.";
  } else if (site.identityMode === 'enforce') {
    return 'This site requires identity verification (userId and userHash).';
  }
  return null;
}

/**
 * The origin of the page asking the gateway, or null when it proves none. The host page proves
 * where it is in one of two ways, both checked by the browser:
 * - it calls the gateway itself: its Origin header (the entry let only an allowed one through);
 * - the window's panel, served from the service's own origin with `frame-ancestors` set to the
 *   site's allowed origins, calls it and names the page that framed it (`hostOrigin`, which the
 *   panel learns from the browser-set origin of the loader's postMessage). The panel only runs
 *   framed by an allowed origin, and no other page shares the service's origin.
 */
export function gatewayOrigin(requestOrigin: string | undefined, hostOrigin: string | undefined, serviceOrigin: string): string | null {
  if (typeof requestOrigin !== 'string') return null;
  if (requestOrigin === serviceOrigin) return hostOrigin ?? null;
  if (hostOrigin !== undefined && hostOrigin !== requestOrigin) return null;
  return requestOrigin;
}

/** Who presents itself at the gateway, from signatures alone (the site's read then decides). */
export type Claimant =
  | { kind: 'identity'; userId?: string; userHash?: string }
  /** An identity token (a JWT the site's server signed) before its check, with the user id it claims. */
  | { kind: 'identity-token'; token: string; userId: string | null }
  /** An identity token that passed its check (verifyIdentityToken). */
  | { kind: 'verified-token'; claims: IdentityClaims }
  | { kind: 'credential'; credential: VisitorClaims }
  | { kind: 'refused-credential'; refusal: TokenRefused }
  | { kind: 'new' };

/** The visitor id the site's read is made for ('' when the gateway will make a new one). */
export function claimedVisitorId(claimant: Claimant): string {
  if (claimant.kind === 'identity') return claimant.userId !== undefined ? verifiedVisitorId(claimant.userId) : '';
  if (claimant.kind === 'identity-token') return claimant.userId !== null ? verifiedVisitorId(claimant.userId) : '';
  if (claimant.kind === 'verified-token') return verifiedVisitorId(claimant.claims.userId);
  if (claimant.kind === 'credential') return claimant.credential.visitorId;
  return '';
}

/**
 * Whether the site lets this claimant in, by the site's identity mode and revocations: the
 * visitor it is (null: a new one) and whether its identity was verified; an ApiError otherwise.
 */
/** The site's identity secret, or a 400 when the site does not verify identities (`field` names what the request sent). */
export function identitySecretOf(site: SiteWindowAccess, field: 'userId' | 'identityToken'): string {
  const secret = site.identityMode === 'off' ? null : site.identitySecret();
  if (!secret) {
    throw new ApiError('invalid_request', `This site does not verify identities; omit ${field === 'userId' ? 'userId and userHash' : 'identityToken'}.`, [
      { path: `/body/${field}`, message: 'identity verification is off for this site' },
    ]);
  }
  return secret;
}

export function admit(site: SiteWindowAccess, claimant: Claimant): { visitorId: string | null; verified: boolean } {
  if (claimant.kind === 'identity-token') throw new Error('admit: check the identity token first (verifyIdentityToken)');
  if (claimant.kind === 'verified-token') {
    identitySecretOf(site, 'identityToken');
    return { visitorId: verifiedVisitorId(claimant.claims.userId), verified: true };
  }
  if (claimant.kind === 'identity') {
    const secret = identitySecretOf(site, 'userId');
    if (claimant.userId === undefined || claimant.userHash === undefined) throw new ApiError('unauthorized', 'userId and userHash go together.');
    if (!identityHashMatches(secret, claimant.userId, claimant.userHash)) throw new ApiError('unauthorized', 'The identity hash does not match the user id.');
    return { visitorId: verifiedVisitorId(claimant.userId), verified: true };
  }
  if (site.identityMode === 'enforce') throw new ApiError('unauthorized', 'This site requires identity verification (userId and userHash).');
  if (claimant.kind === 'refused-credential') throw new ApiError('unauthorized', claimant.refusal.message);
  if (claimant.kind === 'credential') {
    if (site.revokedBefore !== null && claimant.credential.issuedAt <= site.revokedBefore) {
      throw new ApiError('unauthorized', 'This visitor credential was revoked; start without it as a new visitor.');
    }
    return { visitorId: claimant.credential.visitorId, verified: false };
  }
  return { visitorId: null, verified: false };
}

/** The gateway's answer for a token just issued. */
export function tokenAnswer(claims: WindowClaims, token: string, visitorCredential: string | null): TokenResponse {
  const lifetime = claims.expiresAt - claims.issuedAt;
  return {
    data: {
      token,
      tokenType: 'Bearer',
      expiresAt: toIsoRequired(claims.expiresAt),
      expiresIn: Math.round(lifetime / 1000),
      // Refresh with a fifth of the lifetime left, so a slow network or a sleeping tab still makes it.
      refreshAfter: Math.round((lifetime * 0.8) / 1000),
      visitorId: claims.visitorId,
      verified: claims.verified,
      visitorCredential,
    },
  };
}

/** What a request without a usable token is told (a refused token says why; a token of another page says so). */
export function missingTokenRefusal(tokenRefusal: TokenRefused | undefined, claims: WindowClaims | undefined): string {
  if (tokenRefusal) return tokenRefusal.message;
  if (claims) return 'The window token was issued to another origin.';
  return 'Missing window token: send Authorization: Bearer <token from the gateway>.';
}

/** Sites' allowed origins seen by this process in the last minute, bounded. */
export function recentOrigins(now: () => number, max = 10_000) {
  const seen = new Map<string, number>();
  return {
    note(site: string, origin: string) {
      if (seen.size >= max) seen.clear();
      seen.set(`${site} ${origin}`, now() + 60_000);
    },
    has: (site: string, origin: string) => (seen.get(`${site} ${origin}`) ?? 0) > now(),
  };
}

export function createWindowGateway(deps: {
  access: Pick<AccessService, 'windowAccess' | 'isOriginAllowed'>;
  tokens: WindowTokens;
  now: () => number;
  /** Where the panel is served: its requests name the host page in `hostOrigin`. */
  serviceOrigin: string;
  /** Keeps what a checked identity token said of its visitor (name, email, attributes), verified. */
  recordIdentity?: (siteId: string, visitorId: string, claims: IdentityClaims) => Promise<void>;
}) {
  const { access, tokens, now, serviceOrigin } = deps;
  const unauthorized = (message: string) => new ApiError('unauthorized', message);

  return {
    serviceOrigin,

    /** The claims of a bearer token for the site, or why it is refused: an HMAC, no database. */
    readToken(token: string, siteId: string): { claims: WindowClaims } | { refusal: TokenRefused } {
      try {
        return { claims: tokens.verify(token, siteId) };
      } catch (err) {
        if (!(err instanceof TokenRefused)) throw err;
        return { refusal: err };
      }
    },

    /** Why the token may not be used now, from the site's one read (null: it may): every request and every stream's heartbeat. */
    refusalOf: async (claims: WindowClaims) => windowRefusal(await access.windowAccess(claims.siteId, claims.origin, claims.visitorId), claims),

    /** Whether a page of this origin may use the site's window (a long origin is never one). */
    isOriginAllowed: async (siteId: string, origin: string) => origin.length <= MAX_ORIGIN_LENGTH && (await access.isOriginAllowed(siteId, origin)),

    /** A new session's token (and an anonymous visitor's credential) for a page of the site. */
    async issue(siteId: string, requestOrigin: string | undefined, body: TokenRequest): Promise<TokenResponse> {
      const origin = gatewayOrigin(requestOrigin, body.hostOrigin, serviceOrigin);
      if (origin === null) throw unauthorized(GATEWAY_ORIGIN_REFUSED);
      let claimant: Claimant = { kind: 'new' };
      if (body.identityToken !== undefined) {
        if (body.userId !== undefined || body.userHash !== undefined) {
          throw new ApiError('invalid_request', 'Send identityToken or userId and userHash, not both.', [
            { path: '/body/identityToken', message: 'not with userId and userHash' },
          ]);
        }
        claimant = { kind: 'identity-token', token: body.identityToken, userId: claimedUserId(body.identityToken) };
      } else if (body.userId !== undefined || body.userHash !== undefined) claimant = { kind: 'identity', userId: body.userId, userHash: body.userHash };
      else if (body.visitorCredential !== undefined) {
        try {
          claimant = { kind: 'credential', credential: tokens.verifyVisitorCredential(body.visitorCredential, siteId) };
        } catch (err) {
          if (!(err instanceof TokenRefused)) throw err;
          claimant = { kind: 'refused-credential', refusal: err };
        }
      }
      // The session starts before the read: a revocation the read does not see yet is later, and
      // voids this session too.
      const sessionStart = now();
      const site = await access.windowAccess(siteId, origin, claimedVisitorId(claimant));
      if (!site || !site.originAllowed) throw unauthorized(GATEWAY_ORIGIN_REFUSED);
      if (claimant.kind === 'identity-token') {
        // Checked with the site's current secret: a token signed with a rotated one is refused.
        const claims = await verifyIdentityToken(claimant.token, identitySecretOf(site, 'identityToken'), { now: now(), siteId });
        claimant = { kind: 'verified-token', claims };
      }
      const admitted = admit(site, claimant);
      const visitorId = admitted.visitorId ?? newId('vis');
      const verified = admitted.verified;
      if (claimant.kind === 'verified-token') await deps.recordIdentity?.(siteId, visitorId, claimant.claims);
      const issued = tokens.issue({ siteId, visitorId, origin, verified, identityGeneration: verified ? site.identityGeneration : null, sessionStart });
      const credential = verified ? null : tokens.issueVisitorCredential(siteId, visitorId, sessionStart);
      return tokenAnswer(issued.claims, issued.token, credential);
    },

    /**
     * The rest of a session whose token the entry already checked against the site's settings: the
     * new token keeps its session's start, so refreshing never extends a session.
     */
    refresh(claims: WindowClaims): TokenResponse {
      const issued = tokens.issue(claims);
      const credential = claims.verified ? null : tokens.issueVisitorCredential(claims.siteId, claims.visitorId, claims.sessionStart);
      return tokenAnswer(issued.claims, issued.token, credential);
    },
  };
}

export type WindowGateway = ReturnType<typeof createWindowGateway>;
