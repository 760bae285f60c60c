import type { Response } from 'express';
import { ApiError } from '../../platform/errors';
import type { RateDecision } from './limiter';

/** The X-RateLimit-* headers of DECISIONS (every answer to a request counted against a budget). */
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
