import type { Request, Response } from 'express';
import { ApiError } from '../../platform/errors';
import type { RateDecision, RateLimiter } from './limiter';
import { clientIpBucket } from './client-ip';

/** The X-RateLimit-* headers declared in openapi/openapi.yaml (every answer to a request counted against a budget). */
export function rateHeaders(res: Response, d: RateDecision): void {
  res.setHeader('X-RateLimit-Limit', String(d.limit));
  res.setHeader('X-RateLimit-Remaining', String(d.remaining));
  res.setHeader('X-RateLimit-Reset', String(d.resetSeconds));
}

/** 429 with Retry-After in whole seconds, at least 1. */
export function rateLimited(d: RateDecision): ApiError {
  return new ApiError('rate_limit_exceeded', `Rate limit of ${d.limit} requests per minute exceeded; retry in ${d.resetSeconds} s.`, undefined, {
    'Retry-After': String(Math.max(1, d.resetSeconds)),
  });
}

/**
 * Counts a request against its client IP (IPv6 by /64) in the budget named `prefix` (empty
 * for the public API), and refuses it with 429 once the client IP has spent it.
 */
export async function limitByClientIp(limiter: RateLimiter, req: Request, prefix = ''): Promise<void> {
  const d = await limiter.hit(prefix + clientIpBucket(req.ip));
  if (!d.allowed) throw rateLimited(d);
}
