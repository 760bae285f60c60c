import http from 'node:http';
import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { canonicalContentType, jsonBody, multipartBody } from '../http/bodies';
import { validateAgainst, windowDocument } from '../http/openapi-document';
import { limitByAddress as limitAddress, rateHeaders, rateLimited } from '../http/rate-limit/answers';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import type { IncomingFile } from '../media/service';
import type { MessageFormat } from '../messages/store';
import { identityHashMatches, TokenRefused, verifiedVisitorId, WindowClaims, WINDOW_TOKEN_TTL_SECONDS } from './tokens';
import { encodePosition, FeedPosition, toWindowMessage } from './feed';
import { createStreamRegistry, StreamLimits } from './streams';

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

const SITE_PATH = /^\/sites\/(ws_[0-9a-hjkmnp-tv-z]{26})(\/.*)?$/;
const CORS_ALLOWED_HEADERS = 'Authorization, Content-Type, Last-Event-ID, X-Request-Id';
const CORS_EXPOSED_HEADERS = 'X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Idempotent-Replayed';

/**
 * The app strips every Access-Control-* header (noCors: the public API never answers browsers).
 * This entry is the one place that does, for the site's allowed origins only, so it writes those
 * headers past the guard with the response's own setHeader.
 */
function setCorsHeader(res: Response, name: string, value: string) {
  http.ServerResponse.prototype.setHeader.call(res, name, value);
}

export interface WindowRouteOptions {
  services: Services;
  limiter: RateLimiter;
  logger: Logger;
  validateResponses: boolean;
  streams?: Partial<StreamLimits>;
}

/**
 * The chat window's entry, mounted at /window/v1 (openapi/window.yaml). In order: the site's
 * origin rule and CORS, the rate limit of the client address (token requests and anything
 * without a valid token) or of the visitor, the window token, bodies, the document's validation,
 * then the operations.
 */
export function windowRoutes(opts: WindowRouteOptions): Router {
  const { services, limiter } = opts;
  const { access, window: win } = services;
  const serviceOrigin = new URL(services.config.windowPublicUrl ?? services.config.publicUrl).origin; // where the panel is served
  const streams = opts.streams ? createStreamRegistry(opts.streams) : services.window.streams;
  const router = Router();

  const limitByAddress = (req: Request) => limitAddress(limiter, req, 'window-');

  // 1. Origin: a browser request must come from one of the site's allowed origins (or from the
  //    service's own origin, where the window's panel is served). Allowed origins get CORS.
  router.use(async (req, res, next) => {
    try {
      res.setHeader('Vary', 'Origin');
      const site = SITE_PATH.exec(req.path)?.[1];
      const origin = req.headers.origin;
      const allowed = typeof origin === 'string' && site !== undefined && origin !== serviceOrigin && origin.length <= 300 && (await access.isOriginAllowed(site, origin));
      if (allowed) {
        setCorsHeader(res, 'Access-Control-Allow-Origin', origin!);
        setCorsHeader(res, 'Access-Control-Expose-Headers', CORS_EXPOSED_HEADERS);
      }
      if (req.method === 'OPTIONS') {
        await limitByAddress(req);
        if (!allowed) throw new ApiError('unauthorized', 'This origin may not use the chat window of this site.');
        setCorsHeader(res, 'Access-Control-Allow-Methods', 'GET, POST');
        setCorsHeader(res, 'Access-Control-Allow-Headers', CORS_ALLOWED_HEADERS);
        setCorsHeader(res, 'Access-Control-Max-Age', '600');
        res.status(204).end();
        return;
      }
      if (origin !== undefined && origin !== serviceOrigin && !allowed) {
        await limitByAddress(req);
        throw new ApiError('unauthorized', 'This origin may not use the chat window of this site.');
      }
      next();
    } catch (err) {
      next(err);
    }
  });

  // 2. The window token, on everything but the gateway itself.
  const isGateway = (req: Request) => req.method === 'POST' && /^\/sites\/[^/]+\/token\/?$/.test(req.path);
  router.use(async (req, res, next) => {
    try {
      const site = SITE_PATH.exec(req.path)?.[1];
      if (isGateway(req) || !site) {
        await limitByAddress(req);
        return next();
      }
      const header = req.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
      if (!match) {
        await limitByAddress(req);
        throw new ApiError('unauthorized', 'Missing window token: send Authorization: Bearer <token from the gateway>.');
      }
      let claims: WindowClaims;
      try {
        claims = win.tokens.verify(match[1], site);
      } catch (err) {
        await limitByAddress(req);
        if (err instanceof TokenRefused) throw new ApiError('unauthorized', err.message);
        throw err;
      }
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== serviceOrigin && origin !== claims.origin) {
        await limitByAddress(req);
        throw new ApiError('unauthorized', 'The window token was issued to another origin.');
      }
      // Counted before the database is asked anything: the token is already checked (an HMAC).
      const d = await limiter.hit(`window-visitor:${site}:${claims.visitorId}`);
      rateHeaders(res, d);
      if (!d.allowed) throw rateLimited(d);
      // The site's settings may have changed since the token was issued: they apply at once.
      if (!(await access.isOriginAllowed(site, claims.origin))) throw new ApiError('unauthorized', 'The origin of this window token is no longer allowed for the site.');
      const policy = await access.windowPolicy(site);
      if (!policy) throw new ApiError('unauthorized', 'No such site.');
      if (policy.identityMode === 'enforce' && !claims.verified) throw new ApiError('unauthorized', 'This site requires identity verification (userId and userHash).');
      req.windowVisitor = claims;
      next();
    } catch (err) {
      next(err);
    }
  });

  // 3. Bodies: files only for a visitor with a valid token, spooled to disk like the API's.
  router.post('/sites/:siteId/messages', multipartBody(services.config.dataDir, services.config.maxAttachmentBytes));
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
      if (body.hostOrigin === undefined || !(await access.isOriginAllowed(siteId, body.hostOrigin))) throw refuse();
      origin = body.hostOrigin;
    } else {
      if (body.hostOrigin !== undefined && body.hostOrigin !== requestOrigin) throw refuse();
      origin = requestOrigin;
    }
    const policy = await access.windowPolicy(siteId);
    if (!policy) throw refuse();
    let visitorId: string;
    let verified = false;
    if (body.userId !== undefined || body.userHash !== undefined) {
      if (policy.identityMode === 'off' || !policy.identitySecret) {
        throw new ApiError('invalid_request', 'This site does not verify identities; omit userId and userHash.', [{ path: '/body/userId', message: 'identity verification is off for this site' }]);
      }
      if (body.userId === undefined || body.userHash === undefined) throw new ApiError('unauthorized', 'userId and userHash go together.');
      if (!identityHashMatches(policy.identitySecret, body.userId, body.userHash)) throw new ApiError('unauthorized', 'The identity hash does not match the user id.');
      visitorId = verifiedVisitorId(body.userId);
      verified = true;
    } else {
      if (policy.identityMode === 'enforce') throw new ApiError('unauthorized', 'This site requires identity verification (userId and userHash).');
      if (body.visitorCredential !== undefined) {
        try {
          visitorId = win.tokens.verifyVisitorCredential(body.visitorCredential, siteId).visitorId;
        } catch (err) {
          if (err instanceof TokenRefused) throw new ApiError('unauthorized', err.message);
          throw err;
        }
      } else {
        visitorId = newId('vis');
      }
    }
    const issued = win.tokens.issue({ siteId, visitorId, origin, verified });
    const credential = verified ? null : win.tokens.issueVisitorCredential(siteId, visitorId);
    res.status(201).json(tokenAnswer(issued.claims, issued.token, credential));
  });

  router.post('/sites/:siteId/token/refresh', async (req, res) => {
    const claims = req.windowVisitor!;
    const issued = win.tokens.issue({ siteId: claims.siteId, visitorId: claims.visitorId, origin: claims.origin, verified: claims.verified });
    const credential = claims.verified ? null : win.tokens.issueVisitorCredential(claims.siteId, claims.visitorId);
    res.status(201).json(tokenAnswer(issued.claims, issued.token, credential));
  });

  router.get('/sites/:siteId/conversation', async (req, res) => {
    const v = req.windowVisitor!;
    const tail = await win.feed.tail(v.siteId, v.visitorId);
    const latest = await win.store.latestConversation(v.siteId, v.visitorId);
    res.json({ data: { conversation: latest ? services.widget.conversationToDto(latest) : null, lastEventId: encodePosition(tail) } });
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
    const result = await services.widget.visitorSay(v.siteId, v.visitorId, body.content ?? '', {
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
    });
  });

  return router;
}

export { WINDOW_TOKEN_TTL_SECONDS };
