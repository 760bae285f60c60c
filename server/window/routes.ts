import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { canonicalContentType, jsonBody, multipartBody } from '../http/bodies';
import { validateAgainst, windowDocument } from '../http/openapi-document';
import { limitByClientIp as limitClientIp, rateHeaders, rateLimited } from '../http/rate-limit/answers';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import type { IncomingFile } from '../media/service';
import type { operations } from './generated/api';
import { TokenRefused, WindowClaims, WINDOW_TOKEN_TTL_SECONDS } from './tokens';
import { missingTokenRefusal, ORIGIN_REFUSED, recentOrigins, TokenRequest } from './gateway';
import { encodePosition, FeedPosition, toWindowMessage } from './feed';
import { createStreamRegistry, StreamLimits } from './streams';
import { visitorUploadQuotas } from '../media/visitor-uploads';
import { windowContextRoutes } from './context-routes';

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

/** Either body of a send: JSON, or multipart with files (content optional there). */
type SendBody = operations['sendVisitorMessage']['requestBody']['content'][keyof operations['sendVisitorMessage']['requestBody']['content']];
type SendAnswer = operations['sendVisitorMessage']['responses'][201]['content']['application/json'];
type ConversationAnswer = operations['getCurrentConversation']['responses'][200]['content']['application/json'];
type MessagesQuery = NonNullable<operations['listWindowMessages']['parameters']['query']>;
type MessagesAnswer = operations['listWindowMessages']['responses'][200]['content']['application/json'];
type PollAnswer = operations['pollVisitorEvents']['responses'][200]['content']['application/json'];
type TypingBody = operations['reportVisitorTyping']['requestBody']['content']['application/json'];
type SeenBody = operations['markRepliesSeen']['requestBody']['content']['application/json'];
type SeenAnswer = operations['markRepliesSeen']['responses'][200]['content']['application/json'];

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

/**
 * The chat window's entry, mounted at /window/v1 (openapi/window.yaml). In order: the rate limit
 * (of the visitor for a valid token used from its own page, else of the client IP), counted
 * before anything is looked up; the site's origin rule and CORS; the window token against the
 * site's settings (one read); bodies, the document's validation, then the operations.
 */
export function windowRoutes(opts: WindowRouteOptions): Router {
  const { services, limiter } = opts;
  const { window: win } = services;
  const { gateway } = win;
  const serviceOrigin = gateway.serviceOrigin; // where the panel is served
  const streams = opts.streams ? createStreamRegistry(opts.streams) : services.window.streams;
  const router = Router();
  const allowedLately = recentOrigins(win.now);

  const allowCors = (res: Response, origin: string) => {
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSED_HEADERS);
  };
  const isGateway = (req: Request) => req.method === 'POST' && /^\/sites\/[^/]+\/token\/?$/.test(req.path);
  const refused = (message: string) => new ApiError('unauthorized', message);

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
      const read = bearer !== undefined ? gateway.readToken(bearer, site!) : undefined; // an HMAC: no database yet
      const claims: WindowClaims | undefined = read && 'claims' in read ? read.claims : undefined;
      const tokenRefusal: TokenRefused | undefined = read && 'refusal' in read ? read.refusal : undefined;

      if (claims && (foreign === undefined || foreign === claims.origin)) {
        // A valid token from its own page: its origin was allowed when it was issued, and the
        // site's read below says whether it still is. Counted against the visitor first.
        if (foreign) allowCors(res, foreign);
        const d = await limiter.hit(`window-visitor:${site}:${claims.visitorId}`);
        rateHeaders(res, d);
        if (!d.allowed) throw rateLimited(d);
        const refusal = await gateway.refusalOf(claims);
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
      const allowed = foreign !== undefined && site !== undefined && (await gateway.isOriginAllowed(site, foreign));
      if (allowed) {
        allowedLately.note(site!, foreign!);
        allowCors(res, foreign!);
      }
      if (req.method === 'OPTIONS') {
        if (!allowed) throw refused(ORIGIN_REFUSED);
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST');
        res.setHeader('Access-Control-Allow-Headers', CORS_ALLOWED_HEADERS);
        res.setHeader('Access-Control-Max-Age', '600');
        res.status(204).end();
        return;
      }
      if (foreign !== undefined && !allowed) throw refused(ORIGIN_REFUSED);
      if (isGateway(req) || !site) return next();
      throw refused(missingTokenRefusal(tokenRefusal, claims));
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

  // The gateway: the origin the page proves, the visitor it is, the site's settings (gateway.ts).
  router.post('/sites/:siteId/token', async (req, res) => {
    res.status(201).json(await gateway.issue(req.params.siteId, req.headers.origin, (req.body ?? {}) as TokenRequest));
  });

  // The entry checked the token against the site's settings (origin, revocation, identity secret).
  router.post('/sites/:siteId/token/refresh', async (req, res) => {
    res.status(201).json(gateway.refresh(req.windowVisitor!));
  });

  router.get('/sites/:siteId/conversation', async (req, res) => {
    const v = req.windowVisitor!;
    const { conversation, position } = await win.feed.current(v.siteId, v.visitorId);
    const answer: ConversationAnswer = {
      data: { conversation: conversation ? services.window.chat.conversationToDto(conversation) : null, lastEventId: encodePosition(position) },
    };
    res.json(answer);
  });

  router.get('/sites/:siteId/conversations/:conversationId/messages', async (req, res) => {
    const v = req.windowVisitor!;
    // Another visitor's conversation is answered exactly like a missing one.
    const own = await win.feed.conversationOf(v.siteId, v.visitorId, req.params.conversationId);
    if (!own) throw new ApiError('not_found', 'Conversation not found.');
    const page = await win.messages.list(v.siteId, own.id, req.query as MessagesQuery);
    const authorNames = await win.authors.ofMessages(v.siteId, page.data);
    const answer: MessagesAnswer = { data: page.data.map((m, i) => toWindowMessage(m, authorNames[i])), page: page.page };
    res.json(answer);
  });

  router.post('/sites/:siteId/messages', async (req, res) => {
    const v = req.windowVisitor!;
    const body = req.body as SendBody;
    const files: IncomingFile[] = (req.uploadedFiles ?? []).map((f) => ({
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
    const answer: SendAnswer = { data: { conversation: result.conversation, message: toWindowMessage(result.message, null) } };
    res.status(result.replayed ? 200 : 201).json(answer);
  });

  router.get('/sites/:siteId/events/poll', async (req, res) => {
    const v = req.windowVisitor!;
    const after = typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined;
    if (after === undefined) {
      res.json({ data: [], lastEventId: encodePosition(await win.feed.tail(v.siteId, v.visitorId)), hasMore: false } satisfies PollAnswer);
      return;
    }
    const from = await win.feed.checkPosition(v.siteId, v.visitorId, after, '/query/lastEventId');
    const read = await win.feed.read(v.siteId, v.visitorId, from, 100);
    const answer: PollAnswer = { data: read.events, lastEventId: encodePosition(read.position), hasMore: read.more };
    res.json(answer);
  });

  router.get('/sites/:siteId/events', async (req, res) => {
    const v = req.windowVisitor!;
    const given = req.headers['last-event-id'];
    const from: FeedPosition =
      typeof given === 'string' && given !== ''
        ? await win.feed.checkPosition(v.siteId, v.visitorId, given, '/header/last-event-id')
        : await win.feed.tail(v.siteId, v.visitorId);
    await streams.open(req, res, {
      claims: v,
      from,
      feed: win.feed,
      live: win.live,
      logger: opts.logger,
      now: services.window.now,
      refusal: () => gateway.refusalOf(v),
    });
  });

  // Typing (never stored, never the text) and "seen" (live-signals.ts).
  router.post('/sites/:siteId/conversations/:conversationId/typing', async (req, res) => {
    const v = req.windowVisitor!;
    const body = req.body as TypingBody;
    await win.signals.visitorTyping(v.siteId, v.visitorId, req.params.conversationId, body.typing);
    res.status(204).end();
  });

  router.post('/sites/:siteId/conversations/:conversationId/seen', async (req, res) => {
    const v = req.windowVisitor!;
    const body = req.body as SeenBody;
    const answer: SeenAnswer = { data: await win.signals.visitorSaw(v.siteId, v.visitorId, req.params.conversationId, body.messageId) };
    res.json(answer);
  });

  // The visitor's context: where the visitor is, what the page says of it (context-routes.ts).
  router.use(windowContextRoutes(services));

  return router;
}

export { WINDOW_TOKEN_TTL_SECONDS };
