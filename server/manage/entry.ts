import { Router } from 'express';
import { ApiError } from '../platform/errors';
import { canonicalContentType, jsonBody } from '../http/bodies';
import { manageDocument, validateAgainst } from '../http/openapi-document';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { clientIpBucket } from '../http/rate-limit/client-ip';
import { limitByClientIp, rateHeaders, rateLimited } from '../http/rate-limit/answers';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import { createSignInThrottle } from '../accounts/throttle';
import { crossSiteRefusal, sessionCookieOf } from './guards';
import { manageRoutes } from './routes';
import { siteAdminRoutes } from './sites-routes';
import { eventRoutes } from './events-routes';
import { embedCheckRoutes } from './embed-check-routes';
import { visitorRoutes } from './visitors-routes';
import { inboxUploads } from './inbox-routes';
import { isUnsubscribe, unsubscribeBody, unsubscribeRoutes } from './unsubscribe-routes';
import { credentialFreeMatcher, crossSiteMatcher, requireRole } from './roles';

export const MANAGE_BASE_PATH = '/manage/v1';

export interface ManageEntryOptions {
  services: Services;
  limiter: RateLimiter;
  validateResponses: boolean;
  logger: Logger;
}

/**
 * The site a path under /manage/v1 names (`/sites/{siteId}...`), so the credential's lookup reads
 * the caller's role there in the same statement; the role step still judges it (manage/roles.ts).
 */
function siteNamedBy(path: string): string | undefined {
  return /^\/sites\/([^/]+)/.exec(path)?.[1];
}

/**
 * The management API's entry, mounted at /manage/v1 (openapi/manage.yaml). In order:
 *  1. a change without a management token must come from the service's own origin (403
 *     `cross_site_request`), before anything is looked up;
 *  2. the credential: `Authorization: Bearer wcm_...` (a wrong one is 401 at once), else the
 *     `__Host-session` cookie; without a valid one, only the document's `x-role: public`
 *     operations pass (signing in, accepting an invitation, the first-start setup, and
 *     `GET /session`, which then answers `data: null`). A signed-in
 *     account is limited per account, everything else per client IP;
 *  3. the JSON body and the document's validation;
 *  4. the role: the operation's `x-role` (roles.ts), the caller's membership of its site resolved
 *     once (404 for a site it is not a member of, 403 for an agent on an owner's operation); and
 *     its `x-sudo`: a session must have proved its password in the last 10 minutes (403
 *     `reauthentication_required`), a management token passes `true` and is refused `session`;
 *  5. the operations (routes.ts and the other *-routes.ts), which find the membership on the request.
 * No answer carries CORS headers (a browser on another origin cannot read any of them).
 */
export function manageEntry(opts: ManageEntryOptions): Router {
  const { services, limiter } = opts;
  const { signIn, tokens } = services.accounts;
  const serviceOrigin = new URL(services.config.publicUrl).origin;
  const isCredentialFree = credentialFreeMatcher(manageDocument() as never);
  const isCrossSite = crossSiteMatcher(manageDocument() as never);
  const router = Router();

  // 1.
  // (an operation marked `x-cross-site` carries its credential in its URL, never a cookie)
  router.use((req, _res, next) => next((!isCrossSite(req) && crossSiteRefusal(req, serviceOrigin)) || undefined));

  // 2.
  router.use(async (req, res, next) => {
    try {
      const header = req.headers.authorization;
      if (header !== undefined) {
        const token = /^Bearer[ ]+(\S+)\s*$/i.exec(header)?.[1];
        // A presented token holds a slot of its client IP's budget while it is looked up; a valid
        // one gives it back (as the public API does with keys), so guessing tokens is slow.
        const slot = await limiter.reserve('manage:' + clientIpBucket(req.ip));
        if (!slot.allowed) throw rateLimited(slot);
        if (!token) throw new ApiError('unauthorized', 'Send Authorization: Bearer wcm_...');
        try {
          req.manager = await tokens.authenticate(token, siteNamedBy(req.path));
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 'unauthorized')) void slot.release();
          throw err;
        }
        void slot.release();
      } else {
        const cookie = sessionCookieOf(req.headers.cookie);
        if (cookie !== undefined) {
          try {
            req.manager = await signIn.authenticate(cookie, siteNamedBy(req.path));
          } catch (err) {
            if (!(err instanceof ApiError && err.code === 'unauthorized')) throw err;
            // The cookie is left as it is: this answer may arrive after a sign-in that set a new
            // one (the request left before it), and clearing would sign that browser out again.
            if (!isCredentialFree(req)) {
              await limitByClientIp(limiter, req, 'manage:');
              throw err;
            }
          }
        }
      }
      if (req.manager) {
        const d = await limiter.hit(`manage:account:${req.manager.accountId}`);
        rateHeaders(res, d);
        if (!d.allowed) throw rateLimited(d);
      } else {
        await limitByClientIp(limiter, req, 'manage:');
        if (!isCredentialFree(req)) throw new ApiError('unauthorized', 'Sign in (session cookie) or send Authorization: Bearer wcm_...');
      }
      next();
    } catch (err) {
      next(err);
    }
  });

  // 3. (an inbox reply with files is multipart, spooled once its site and conversation are known)
  router.use(inboxUploads(services));
  router.use(jsonBody, canonicalContentType);
  router.use((req, res, next) => (isUnsubscribe(req) ? unsubscribeBody(req, res, next) : next()));
  router.use(validateAgainst(manageDocument(), opts.validateResponses));

  // 4.
  router.use(requireRole(services.accounts.members, signIn.sudoRefusal));

  // 5.
  router.use(manageRoutes(services, createSignInThrottle(limiter, services.keys.deviceCookies), opts.logger, limiter));
  router.use(siteAdminRoutes(services.siteAdmin));
  router.use(eventRoutes(services));
  router.use(embedCheckRoutes(services.embedCheck, limiter));
  router.use(visitorRoutes(services));
  router.use(unsubscribeRoutes(services.unsubscribe));
  return router;
}
