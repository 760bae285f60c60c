import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { canonicalContentType, jsonBody, multipartBody } from '../http/bodies';
import { validateAgainst, windowDocument } from '../http/openapi-document';
import { limitByClientIp as limitClientIp, rateHeaders, rateLimited } from '../http/rate-limit/answers';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { AccessService } from '../access/service';
import type { Logger } from '../platform/logger';
import type { IncomingFile } from '../media/service';
import type { MessageFormat } from '../messages/store';
import { identityHashMatches, TokenRefused, verifiedVisitorId, VisitorClaims, WindowClaims, WINDOW_TOKEN_TTL_SECONDS } from './tokens';
import { encodePosition, FeedPosition, toWindowMessage } from './feed';
import { createStreamRegistry, StreamLimits } from './streams';
import { visitorUploadQuotas } from '../media/visitor-uploads';

export const WINDOW_BASE_PATH = '/window/v1';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The visitor a valid window token names (window entry only). */
      windowVisitor?: WindowClaims;
    }
  }
}

// Hand-typed: the window document is small and has no generated types (scripts/generate.ts
// covers the public API only).
interface TokenRequestBody {
  hostOrigin?: string;
  visitorCredential?: string;
  userId?: string;
  userHash?: string;
}
interface SendBody {
  content?: string;
  format?: MessageFormat;
  clientMessageId: string;
}

type WindowAccess = NonNullable<Awaited<ReturnType<AccessService['windowAccess']>>>;

const SITE_PATH = /^\/sites\/(ws_[0-9a-hjkmnp-tv-z]{26})(\/.*)?$/;
const CORS_ALLOWED_HEADERS = 'Authorization, Content-Type, Last-Event-ID, X-Request-Id';
const CORS_EXPOSED_HEADERS = 'X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Idempotent-Replayed';

export interface WindowRouteOptions {
  services: Services;
  limiter: RateLimiter;
  logger: Logger;
  validateResponses: boolean;
  streams?: Partial<StreamLimits>;
}

/** Why a valid token may not be used now, from the site's one read (null: it may). */
function windowRefusal(site: WindowAccess | null, claims: WindowClaims): string | null {
  if (!site) return 'No such site.';
  // The site's settings may have changed since the token was issued: they apply at once.
  if (!site.originAllowed) return 'The origin of this window token is no longer allowed for the site.';
  if (site.revokedBefore !== null && claims.sessionStart <= site.revokedBefore) return "This visitor's window access was revoked; start again at the gateway.";
  if (claims.verified) {
    if (site.identityMode === 'off') return 'This site no longer verifies identities; start again at the gateway.';
    if (claims.identityGeneration !== site.identityGeneration) return "The site's identity secret changed since this visitor was verified; verify again at the gateway.";
  } else if (site.identityMode === 'enforce') {
    return 'This site requires identity verification (userId and userHash).';
  }
  return null;
}

/** Sites' allowed origins seen by this process in the last minute, bounded. */
function recentOrigins(now: () => number, max = 10_000) {
  const seen = new Map<string, number>();
  return {
    note(site: string, origin: string) {
      if (seen.size >= max) seen.clear();
      seen.set(`${site} ${origin}`, now() + 60_000);
    },
    has: (site: string, origin: string) => (seen.get(`${site} ${origin}`) ?? 0) > now(),
  };
}

/**
 * The chat window's entry, mounted at /window/v1 (openapi/window.yaml). In order: the rate limit
 * (of the visitor for a valid token used from its own page, else of the client IP), counted
 * before anything is looked up; the site's origin rule and CORS; the window token against the
 * site's settings (one read); bodies, the document's validation, then the operations.
 */
export function windowRoutes(opts: WindowRouteOptions): Router {
  const { services, limiter } = opts;
  const { access, window: win } = services;
  const serviceOrigin = new URL(services.config.windowPublicUrl ?? services.config.publicUrl).origin; // where the panel is served
  const streams = opts.streams ? createStreamRegistry(opts.streams) : services.window.streams;
  const router = Router();
  const allowedLately = recentOrigins(win.now);

  const allowCors = (res: Response, origin: string) => {
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSED_HEADERS);
  };
  const isGateway = (req: Request) => req.method === 'POST' && /^\/sites\/[^/]+\/token\/?$/.test(req.path);
  const refused = (message: string) => new ApiError('unauthorized', message);
  /** Why the token may not be used now, from the site's one read (null: it may): every request and every stream's heartbeat. */
  const refusalOf = async (claims: WindowClaims) => windowRefusal(await access.windowAccess(claims.siteId, claims.origin, claims.visitorId), claims);

  // 1–2. A browser request must come from one of the site's allowed origins (or from the service's
  //      own origin, where the window's panel is served); allowed origins get CORS. Everything but
  //      the gateway needs a window token.
  router.use(async (req, res, next) => {
    try {
      res.setHeader('Vary', 'Origin');
      const site = SITE_PATH.exec(req.path)?.[1];
      const origin = req.headers.origin;
      const foreign = typeof origin === 'string' && origin !== serviceOrigin ? origin : undefined;
      const header = req.headers.authorization;
      const bearer = site && req.method !== 'OPTIONS' && !isGateway(req) && typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header)?.[1] : undefined;
      let claims: WindowClaims | undefined;
      let tokenRefusal: TokenRefused | undefined;
      if (bearer !== undefined) {
        try {
          claims = win.tokens.verify(bearer, site!); // an HMAC: no database yet
        } catch (err) {
          if (!(err instanceof TokenRefused)) throw err;
          tokenRefusal = err;
        }
      }

      if (claims && (foreign === undefined || foreign === claims.origin)) {
        // A valid token from its own page: its origin was allowed when it was issued, and the
        // site's read below says whether it still is. Counted against the visitor first.
        if (foreign) allowCors(res, foreign);
        const d = await limiter.hit(`window-visitor:${site}:${claims.visitorId}`);
        rateHeaders(res, d);
        if (!d.allowed) throw rateLimited(d);
        const refusal = await refusalOf(claims);
        if (refusal) {
          if (foreign) res.removeHeader('Access-Control-Allow-Origin');
          throw refused(refusal);
        }
        req.windowVisitor = claims;
        return next();
      }

      // Everything else counts against its client IP before any lookup, so a flood of
      // refused requests is throttled before it costs the database anything. A 429 is readable
      // by a page whose origin this process saw allowed in the last minute.
      try {
        await limitClientIp(limiter, req, 'window-');
      } catch (err) {
        if (foreign && site && allowedLately.has(site, foreign)) allowCors(res, foreign);
        throw err;
      }
      const allowed = foreign !== undefined && site !== undefined && foreign.length <= 300 && (await access.isOriginAllowed(site, foreign));
      if (allowed) {
        allowedLately.note(site!, foreign!);
        allowCors(res, foreign!);
      }
      if (req.method === 'OPTIONS') {
        if (!allowed) throw refused('This origin may not use the chat window of this site.');
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST');
        res.setHeader('Access-Control-Allow-Headers', CORS_ALLOWED_HEADERS);
        res.setHeader('Access-Control-Max-Age', '600');
        res.status(204).end();
        return;
      }
      if (foreign !== undefined && !allowed) throw refused('This origin may not use the chat window of this site.');
      if (isGateway(req) || !site) return next();
      if (tokenRefusal) throw refused(tokenRefusal.message);
      if (claims) throw refused('The window token was issued to another origin.');
      throw refused('Missing window token: send Authorization: Bearer <token from the gateway>.');
    } catch (err) {
      next(err);
    }
  });

  // 3. Bodies: files only for a visitor with a valid token, spooled to disk like the API's, within
  //    the visitor-file quotas and the site's setting (checked before and while the body is read).
  router.post(
    '/sites/:siteId/messages',
    visitorUploadQuotas({ limiter, visitorFiles: services.visitorFiles, now: services.window.now }),
    multipartBody(services.config.dataDir, services.config.maxAttachmentBytes),
  );
  router.use(jsonBody, canonicalContentType);
  router.use(validateAgainst(windowDocument(), opts.validateResponses));

  const tokenAnswer = (claims: WindowClaims, token: string, visitorCredential: string | null) => ({
    data: {
      token,
      tokenType: 'Bearer' as const,
      expiresAt: toIsoRequired(claims.expiresAt),
      expiresIn: Math.round((claims.expiresAt - claims.issuedAt) / 1000),
      // Refresh with a fifth of the lifetime left, so a slow network or a sleeping tab still makes it.
      refreshAfter: Math.round(((claims.expiresAt - claims.issuedAt) * 0.8) / 1000),
      visitorId: claims.visitorId,
      verified: claims.verified,
      visitorCredential,
    },
  });

  // The gateway.
  router.post('/sites/:siteId/token', async (req, res) => {
    const siteId = req.params.siteId;
    const body = (req.body ?? {}) as TokenRequestBody;
    const requestOrigin = req.headers.origin;
    const refuse = () => new ApiError('unauthorized', "The gateway answers the site's own pages only: the request's Origin must be one of the site's allowed origins.");
    // The host page proves where it is in one of two ways, both checked by the browser:
    // - it calls the gateway itself: its Origin header (step 1 let only an allowed one through);
    // - the window's panel, served from the service's own origin with `frame-ancestors` set to the
    //   site's allowed origins, calls it and names the page that framed it (`hostOrigin`, which the
    //   panel learns from the browser-set origin of the loader's postMessage). The panel only runs
    //   framed by an allowed origin, and no other page shares the service's origin.
    let origin: string;
    if (typeof requestOrigin !== 'string') throw refuse();
    if (requestOrigin === serviceOrigin) {
      if (body.hostOrigin === undefined) throw refuse();
      origin = body.hostOrigin;
    } else {
      if (body.hostOrigin !== undefined && body.hostOrigin !== requestOrigin) throw refuse();
      origin = requestOrigin;
    }
    const identity = body.userId !== undefined || body.userHash !== undefined;
    // Who the visitor would be, from signatures alone; the site's one read then says whether it may.
    let visitorId = identity && body.userId !== undefined ? verifiedVisitorId(body.userId) : undefined;
    let credential: VisitorClaims | undefined;
    let credentialRefusal: TokenRefused | undefined;
    if (!identity && body.visitorCredential !== undefined) {
      try {
        credential = win.tokens.verifyVisitorCredential(body.visitorCredential, siteId);
        visitorId = credential.visitorId;
      } catch (err) {
        if (!(err instanceof TokenRefused)) throw err;
        credentialRefusal = err;
      }
    }
    // The session starts before the read: a revocation the read does not see yet is later, and
    // voids this session too.
    const sessionStart = win.now();
    const site = await access.windowAccess(siteId, origin, visitorId ?? '');
    if (!site || !site.originAllowed) throw refuse();
    let verified = false;
    if (identity) {
      const secret = site.identityMode === 'off' ? null : site.identitySecret();
      if (!secret) {
        throw new ApiError('invalid_request', 'This site does not verify identities; omit userId and userHash.', [{ path: '/body/userId', message: 'identity verification is off for this site' }]);
      }
      if (body.userId === undefined || body.userHash === undefined) throw new ApiError('unauthorized', 'userId and userHash go together.');
      if (!identityHashMatches(secret, body.userId, body.userHash)) throw new ApiError('unauthorized', 'The identity hash does not match the user id.');
      verified = true;
    } else {
      if (site.identityMode === 'enforce') throw new ApiError('unauthorized', 'This site requires identity verification (userId and userHash).');
      if (credentialRefusal) throw new ApiError('unauthorized', credentialRefusal.message);
      if (credential && site.revokedBefore !== null && credential.issuedAt <= site.revokedBefore) {
        throw new ApiError('unauthorized', 'This visitor credential was revoked; start without it as a new visitor.');
      }
    }
    visitorId ??= newId('vis');
    const issued = win.tokens.issue({ siteId, visitorId, origin, verified, identityGeneration: verified ? site.identityGeneration : null, sessionStart });
    const credentialOut = verified ? null : win.tokens.issueVisitorCredential(siteId, visitorId, sessionStart);
    res.status(201).json(tokenAnswer(issued.claims, issued.token, credentialOut));
  });

  // Step 2 checked the token against the site's settings (origin, revocation, identity secret);
  // the new token keeps its session's start, so refreshing never extends a session.
  router.post('/sites/:siteId/token/refresh', async (req, res) => {
    const claims = req.windowVisitor!;
    const issued = win.tokens.issue(claims);
    const credential = claims.verified ? null : win.tokens.issueVisitorCredential(claims.siteId, claims.visitorId, claims.sessionStart);
    res.status(201).json(tokenAnswer(issued.claims, issued.token, credential));
  });

  router.get('/sites/:siteId/conversation', async (req, res) => {
    const v = req.windowVisitor!;
    const tail = await win.feed.tail(v.siteId, v.visitorId);
    const latest = await win.store.latestConversation(v.siteId, v.visitorId);
    res.json({ data: { conversation: latest ? services.window.chat.conversationToDto(latest) : null, lastEventId: encodePosition(tail) } });
  });

  router.get('/sites/:siteId/conversations/:conversationId/messages', async (req, res) => {
    const v = req.windowVisitor!;
    // Another visitor's conversation is answered exactly like a missing one.
    const own = await win.store.conversationOfVisitor(v.siteId, v.visitorId, req.params.conversationId);
    if (!own) throw new ApiError('not_found', 'Conversation not found.');
    const page = await win.messages.list(v.siteId, own.id, req.query as { limit?: number; cursor?: string; order?: 'asc' | 'desc' });
    res.json({ data: page.data.map(toWindowMessage), page: page.page });
  });

  router.post('/sites/:siteId/messages', async (req, res) => {
    const v = req.windowVisitor!;
    const body = req.body as SendBody;
    const files: IncomingFile[] = ((req.files as Express.Multer.File[] | undefined) ?? []).map((f) => ({
      tempPath: f.path,
      originalName: f.originalname,
      mimeType: f.mimetype,
    }));
    const result = await services.window.chat.visitorSay(v.siteId, v.visitorId, body.content ?? '', {
      format: body.format ?? 'plain',
      files,
      clientMessageId: body.clientMessageId,
    });
    if (result.replayed) res.setHeader('Idempotent-Replayed', 'true');
    res.status(result.replayed ? 200 : 201).json({ data: { conversation: result.conversation, message: toWindowMessage(result.message) } });
  });

  router.get('/sites/:siteId/events/poll', async (req, res) => {
    const v = req.windowVisitor!;
    const after = typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined;
    if (after === undefined) {
      res.json({ data: [], lastEventId: encodePosition(await win.feed.tail(v.siteId, v.visitorId)), hasMore: false });
      return;
    }
    const from = await win.feed.checkPosition(v.siteId, v.visitorId, after, '/query/lastEventId');
    const read = await win.feed.read(v.siteId, v.visitorId, from, 100);
    res.json({ data: read.events, lastEventId: encodePosition(read.position), hasMore: read.more });
  });

  router.get('/sites/:siteId/events', async (req, res) => {
    const v = req.windowVisitor!;
    const given = req.headers['last-event-id'];
    const from: FeedPosition =
      typeof given === 'string' && given !== '' ? await win.feed.checkPosition(v.siteId, v.visitorId, given, '/header/last-event-id') : await win.feed.tail(v.siteId, v.visitorId);
    streams.open(req, res, {
      claims: v,
      from,
      feed: win.feed,
      live: win.live,
      logger: opts.logger,
      now: services.window.now,
      refusal: () => refusalOf(v),
    });
  });

  return router;
}

export { WINDOW_TOKEN_TTL_SECONDS };
