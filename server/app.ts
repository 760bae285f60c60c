import express, { Express } from 'express';
import { READY, Readiness } from './platform/readiness';
import type { Services } from './services';
import type { Logger } from './platform/logger';
import type { RateLimiter } from './http/rate-limit/limiter';
import { openApiDocument, validateAgainst } from './http/openapi-document';
import { docsRoutes } from './http/docs';
import { errorHandler, notFoundHandler, sendError } from './http/error-handler';
import { ApiError } from './platform/errors';
import { securityHeaders } from './http/headers';
import { accessLog } from './http/access-log';
import { fastJson } from './http/json';
import { authenticate } from './http/authenticate';
import { canonicalContentType, jsonBody, multipartBody } from './http/bodies';
import { checkBeforeUpload, requireScopes } from './http/scopes';
import { idempotency } from './http/idempotency';
import { conversationRoutes } from './conversations/routes';
import { messageRoutes, normaliseReply } from './messages/routes';
import { mediaRoutes } from './media/routes';
import { schemaRoutes } from './webhooks/schema-routes';
import { windowRoutes, WINDOW_BASE_PATH } from './window/routes';
import { windowAssetRoutes } from './window/assets';
import { limitByClientIp } from './http/rate-limit/answers';
import { manageEntry, MANAGE_BASE_PATH } from './manage/entry';
import { dashboardRoutes, DASHBOARD_BASE_PATH } from './dashboard/routes';

export interface AppOptions {
  services: Services;
  logger: Logger;
  limiter: RateLimiter;
  /** Validate answers against the document too (on outside production, and in every test). */
  validateResponses: boolean;
  /** /readyz: whether the database answers, or each dependency's state (platform/readiness.ts). */
  ready: () => Promise<boolean | Readiness>;
}

/** /readyz answers 503 when its checks have not answered within this. */
export const READY_TIMEOUT_MS = 2000;

/**
 * The whole request pipeline, in order. Read top to bottom to see what a request meets.
 */
export function createApp(opts: AppOptions): Express {
  const { services, logger } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', services.config.trustProxy);
  fastJson(app);

  // 1. Request id and a structured access log (never the Authorization header or link signatures).
  app.use(accessLog(app, logger));

  // 2. Headers every answer carries (and the Host check). CORS is decided per router: only the
  //    chat window's entry (windowRoutes) sets Access-Control-*; the public API sets none.
  app.use(securityHeaders);

  // The chat window is served on an origin of its own when WINDOW_PUBLIC_URL is set: that host
  // answers the window and its visitors' file links only, the main host everything else.
  const windowHost = services.config.windowPublicUrl ? new URL(services.config.windowPublicUrl).hostname : undefined;
  const main = mainRoutes(opts);
  const windowApp = windowSide(opts);
  if (windowHost) {
    main.use(WINDOW_BASE_PATH, (_req, _res, next) =>
      next(new ApiError('not_found', `The chat window is served at ${services.config.windowPublicUrl}${WINDOW_BASE_PATH}/ (WINDOW_PUBLIC_URL).`)),
    );
    app.use((req, res, next) => (req.hostname?.toLowerCase() === windowHost ? windowApp(req, res, next) : main(req, res, next)));
  } else {
    main.use(windowApp);
    app.use(main);
  }

  // 5. Everything else is 404, and every failure leaves through one handler in the envelope.
  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  return app;
}

/** The main host: operational endpoints, the documents and Swagger UI, the public API. */
function mainRoutes(opts: AppOptions): express.Router {
  const { services, limiter } = opts;
  const main = express.Router();
  // 3. Operational endpoints outside the versioned API.
  main.get('/healthz', (_req, res) => {
    res.json({ data: { status: 'ok' } });
  });
  main.get('/readyz', async (_req, res) => {
    // A load balancer polls this with a short time-out of its own: a database that hangs must
    // still get an answer from us, not a timed-out probe.
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
    });
    const answer = await Promise.race([opts.ready().catch(() => false), timedOut]);
    clearTimeout(timer);
    const checks: Readiness = typeof answer === 'boolean' ? { database: answer ? READY : 'does not answer' } : answer;
    const failing = Object.entries(checks).filter(([, state]) => state !== READY);
    // Answered here, not thrown: a load balancer polls this during an outage, and the error
    // handler would log every probe.
    if (failing.length) {
      const details = failing.map(([path, message]) => ({ path, message }));
      const summary = failing.map(([what, state]) => `${what} ${state}`).join('; ');
      return sendError(res, new ApiError('service_unavailable', `Not ready: ${summary}.`, details, { 'Retry-After': '5' }));
    }
    res.json({ data: { status: 'ready', checks } });
  });
  // The service's origin alone leads to the dashboard (which links Swagger UI); a relative target
  // keeps whatever host and port the client used. HEAD is answered by the GET route.
  main.get('/', (_req, res) => res.redirect(302, DASHBOARD_BASE_PATH + '/'));
  main.use(docsRoutes({ persistAuthorization: services.config.docsPersistAuthorization }));
  // 3b. The dashboard's browser side: static files and its HTML shell (it calls /manage/v1 only).
  main.use(DASHBOARD_BASE_PATH, dashboardRoutes({ logger: opts.logger }));

  // 4. The public API.
  const api = express.Router();
  // HEAD is GET without a body (RFC 9110). Node already suppresses the body of a HEAD answer, so
  // the document's GET operations serve it.
  api.use((req, _res, next) => {
    if (req.method === 'HEAD') req.method = 'GET';
    next();
  });
  api.use(authenticate(services.access, limiter)); // 401 / 429 before anything else is looked at
  // An upload is refused (400 path id / 403 right / 404 conversation) before any byte is spooled.
  api.post(
    '/conversations/:id/messages',
    checkBeforeUpload('post', '/conversations/{id}/messages', (siteId, { id }) => services.conversations.get(siteId, id)),
    multipartBody(services.config.dataDir, services.config.maxAttachmentBytes),
  );
  api.use(jsonBody, canonicalContentType);
  api.use(validateAgainst(openApiDocument(), opts.validateResponses));
  api.use(requireScopes); // 403 from the operation's security scopes in the document
  api.post('/conversations/:id/messages', idempotency(services.idempotency, normaliseReply));
  api.use(schemaRoutes());
  api.use(conversationRoutes(services.conversations));
  api.use(messageRoutes(services.messages));
  api.use(mediaRoutes(services.media));
  main.use('/api/v1', api);

  // 4c. The management API (openapi/manage.yaml): accounts by session cookie or management token,
  //     its own pipeline in manage/entry.ts.
  main.use(MANAGE_BASE_PATH, manageEntry({ services, limiter, logger: opts.logger, validateResponses: opts.validateResponses }));
  return main;
}

const SIGNED_LINK = { expires: /^\d{1,11}$/, signature: /^[0-9a-f]{64}$/ };

/**
 * 4b. The chat window's own entry (openapi/window.yaml): window tokens instead of API keys, CORS
 *     for the site's allowed origins only, live updates by Server-Sent Events. Never under /api/v1.
 *     Its browser side (loader, panel document, versioned assets) is not in window.yaml: it is
 *     static code for browsers, not an operation, so it is mounted ahead of the entry's validator.
 *     With an origin of its own, the visitors' signed file links are answered there too (and only
 *     there: they are signed with the window's own key).
 */
function windowSide(opts: AppOptions): express.Router {
  const { services, limiter, logger } = opts;
  const windowApp = express.Router();
  windowApp.use(WINDOW_BASE_PATH, windowAssetRoutes({ services, limiter, logger }));
  windowApp.use(WINDOW_BASE_PATH, windowRoutes({ services, limiter, logger, validateResponses: opts.validateResponses }));
  if (services.config.windowPublicUrl) {
    windowApp.get('/api/v1/media/:id', async (req, _res, next) => {
      try {
        await limitByClientIp(limiter, req);
        // No validator on this host: the link's two parameters are checked here, as single values.
        const { expires, signature } = req.query;
        if (typeof expires !== 'string' || typeof signature !== 'string' || !SIGNED_LINK.expires.test(expires) || !SIGNED_LINK.signature.test(signature)) {
          throw new ApiError('unauthorized', 'The media link signature is invalid or expired.');
        }
        next();
      } catch (err) {
        next(err);
      }
    });
    windowApp.use('/api/v1', mediaRoutes(services.window.media));
  }
  return windowApp;
}
