import type { Request, RequestHandler } from 'express';
import { ApiError } from '../platform/errors';
import type { Scope } from '../access/scopes';
import './request-context';

/**
 * Rights come from the document: the scopes of the operation's `apiKey` security requirement.
 * Runs after the validator has matched the operation.
 */
export const requireRights: RequestHandler = (req, _res, next) => {
  const schema = (req as Request & { openapi?: { schema?: { security?: Record<string, string[]>[] } } }).openapi?.schema;
  const security = schema?.security;
  if (!security || security.length === 0) return next(); // public operation
  if (!req.principal) {
    if (req.mediaLink && security.some((s) => 'mediaLink' in s)) return next();
    return next(new ApiError('unauthorized', 'Missing API key: send Authorization: Bearer wck_...'));
  }
  const needed = security.find((s) => 'apiKey' in s)?.apiKey ?? [];
  const missing = needed.filter((s) => !req.principal!.scopes.includes(s as Scope));
  if (missing.length) return next(new ApiError('insufficient_scope', `This key lacks the ${missing.join(', ')} right.`));
  next();
};

