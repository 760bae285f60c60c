import type { Request, RequestHandler } from 'express';
import { ApiError } from '../platform/errors';
import type { AccessService } from '../access/service';
import type { RateLimiter, RateDecision } from './rate-limit/limiter';
import './request-context';

function rateHeaders(res: Parameters<RequestHandler>[1], d: RateDecision) {
  res.setHeader('X-RateLimit-Limit', String(d.limit));
  res.setHeader('X-RateLimit-Remaining', String(d.remaining));
  res.setHeader('X-RateLimit-Reset', String(d.resetSeconds));
}

function rateLimited(d: RateDecision) {
  return new ApiError('rate_limit_exceeded', `Rate limit of ${d.limit} requests per minute exceeded; retry in ${d.resetSeconds} s.`, undefined, {
    'Retry-After': String(Math.max(1, d.resetSeconds)),
  });
}

/** Paths under /api/v1 that open without a key: published schemas, and media by signed link. */
function isKeyless(req: Request): boolean {
  if (req.method === 'OPTIONS') return true; // answered 405 without CORS headers by the validator
  if (req.path === '/schemas' || req.path.startsWith('/schemas/')) return true;
  return req.method === 'GET' && req.path.startsWith('/media/') && !req.headers.authorization && 'signature' in req.query;
}

/**
 * Authentication, then the per-key rate limit. Requests without a valid key are limited per client
 * address, so keys cannot be guessed at speed.
 */
export function authenticate(access: AccessService, limiter: RateLimiter): RequestHandler {
  /** Counts a request that holds no valid key against its client address. */
  async function limitByAddress(req: Request) {
    const d = await limiter.hit(`ip:${req.ip}`);
    if (!d.allowed) throw rateLimited(d);
  }
  return async (req, res, next) => {
    try {
      if (isKeyless(req)) {
        await limitByAddress(req);
        req.mediaLink = req.path.startsWith('/media/');
        return next();
      }
      const header = req.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
      if (!match) {
        await limitByAddress(req);
        throw new ApiError('unauthorized', 'Missing API key: send Authorization: Bearer wck_...');
      }
      try {
        req.principal = await access.authenticate(match[1]);
      } catch (err) {
        if (err instanceof ApiError && err.code === 'unauthorized') await limitByAddress(req);
        throw err;
      }
      const d = await limiter.hit(`key:${req.principal.keyId}`);
      rateHeaders(res, d);
      if (!d.allowed) throw rateLimited(d);
      next();
    } catch (err) {
      next(err);
    }
  };
}

