import { ApiError } from '../platform/errors';
import type { Request, RequestHandler } from 'express';
import { ulidBody } from '../platform/ids';

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** A caller-supplied X-Request-Id is kept when harmless (no log injection), else we make one. */
export function requestId(req: Request): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : `req_${ulidBody()}`;
}

/**
 * Headers every answer carries, and the HTTP/1.1 Host check (RFC 9112, 3.2: Node's own check
 * answers an empty 400; the server turns it off, requireHostHeader: false, so the refusal comes
 * here, in the envelope). One middleware for both: each layer costs a router step per request.
 */
export const securityHeaders: RequestHandler = (req, res, next) => {
  res.setHeader('X-Request-Id', String(req.id));
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
  if (req.httpVersion === '1.1' && !req.headers.host) {
    res.setHeader('Connection', 'close'); // a client that omits Host is not one to keep talking to
    return next(new ApiError('invalid_request', 'An HTTP/1.1 request needs a Host header.'));
  }
  next();
};
