import type { Request, RequestHandler } from 'express';
import { ApiError } from '../platform/errors';
import type { AccessService } from '../access/service';
import type { RateLimiter } from './rate-limit/limiter';
import { clientIpBucket } from './rate-limit/client-ip';
import { limitByClientIp as limitClientIp, rateHeaders, rateLimited } from './rate-limit/answers';
import './request-context';

/** Paths under /api/v1 that open without a key: published schemas, and media by signed link. */
function isKeyless(req: Request): boolean {
  if (req.method === 'OPTIONS') return true; // answered 405 without CORS headers by the validator
  if (req.path === '/schemas' || req.path.startsWith('/schemas/')) return true;
  return req.method === 'GET' && req.path.startsWith('/media/') && !req.headers.authorization && 'signature' in req.query;
}

/**
 * Authentication, then the per-key rate limit. Requests without a valid key are limited per client
 * IP (`clientIpBucket`: IPv4, or the IPv6 /64), so keys cannot be guessed at speed.
 *
 * A presented key takes a slot in its client IP's window before it is looked up, and gives it back
 * when it proves valid: a client IP whose window is full is answered 429 without touching the
 * database, and one client IP can never have more than the limit of lookups running or failed in a
 * minute, however many it sends at once. A valid key from such a client IP is refused too; letting
 * it through would tell a guesser which of its keys work.
 */
export function authenticate(access: AccessService, limiter: RateLimiter): RequestHandler {
  /** Counts a request that holds no valid key against its client IP. */
  const limitByClientIp = (req: Request) => limitClientIp(limiter, req);
  return async (req, res, next) => {
    try {
      if (isKeyless(req)) {
        await limitByClientIp(req);
        req.mediaLink = req.path.startsWith('/media/');
        return next();
      }
      const header = req.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
      if (!match) {
        await limitByClientIp(req);
        throw new ApiError('unauthorized', 'Missing API key: send Authorization: Bearer wck_...');
      }
      const slot = await limiter.reserve(clientIpBucket(req.ip));
      if (!slot.allowed) throw rateLimited(slot);
      try {
        req.principal = await access.authenticate(match[1]);
      } catch (err) {
        // A wrong key keeps its slot; a database failure is not the client's doing.
        if (!(err instanceof ApiError && err.code === 'unauthorized')) void slot.release();
        throw err;
      }
      void slot.release(); // not awaited: the answer does not depend on it
      const d = await limiter.hit(`key:${req.principal.keyId}`);
      rateHeaders(res, d);
      if (!d.allowed) throw rateLimited(d);
      next();
    } catch (err) {
      next(err);
    }
  };
}
