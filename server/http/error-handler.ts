import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ApiError, ErrorCode, ErrorDetail } from '../platform/errors';
import { isConnectionError } from '../db/knex';
import type { Logger } from '../platform/logger';

interface ValidatorError {
  status?: number;
  message?: string;
  errors?: { path?: string; message?: string }[];
  headers?: Record<string, string>;
}

/** body-parser and express-openapi-validator failures, translated into our codes (multipart bodies answer in ours: http/bodies.ts). */
function translate(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  const e = err as { type?: string; status?: number; message?: string };
  if (isStorageFull(err)) return new ApiError('insufficient_storage', 'The service has no room to store this right now; retry later.');
  switch (e?.type) {
    case 'entity.too.large':
      return new ApiError('payload_too_large', 'The request body is larger than 65536 bytes.');
    case 'entity.parse.failed':
      return new ApiError('invalid_request', 'The request body is not valid JSON.', [{ path: '/body', message: 'must be valid JSON' }]);
    case 'entity.verify.failed':
      return new ApiError('invalid_request', e.message ?? 'The request body is not valid UTF-8.', [{ path: '/body', message: 'must be valid UTF-8' }]);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ApiError('unsupported_media_type', 'Send the body as UTF-8 application/json or multipart/form-data.');
    case 'request.aborted':
    case 'request.size.invalid':
      return new ApiError('invalid_request', 'The request body was incomplete.');
  }
  // Express's router (a path segment that is not valid percent-encoding) and body-parser (a
  // Content-Encoding the body does not decode with) report client errors as plain 4xx errors
  // without a type or a validator's `errors` list.
  if (err instanceof URIError) {
    return new ApiError('invalid_request', 'The path is not valid percent-encoding.', [{ path: '/path', message: 'must be valid percent-encoding' }]);
  }
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && !Array.isArray((err as ValidatorError).errors)) {
    if (e.status === 413) return new ApiError('payload_too_large', 'The request body is too large.');
    if (e.status === 415) return new ApiError('unsupported_media_type', 'Send application/json or multipart/form-data.');
    return new ApiError('invalid_request', 'The request body could not be decoded.', [{ path: '/body', message: 'could not be decoded' }]);
  }
  const v = err as ValidatorError;
  if (typeof v?.status === 'number' && Array.isArray(v.errors) && v.status < 500) {
    const details: ErrorDetail[] = v.errors.map((d) => ({
      path: (d.path ?? '').replace(/^\.?/, '/').replace(/\./g, '/').replace(/^\/+/, '/'),
      message: d.message ?? 'is invalid',
    }));
    const code: ErrorCode =
      v.status === 404
        ? 'not_found'
        : v.status === 405
          ? 'method_not_allowed'
          : v.status === 413
            ? 'payload_too_large'
            : v.status === 415
              ? 'unsupported_media_type'
              : 'invalid_request';
    const message =
      code === 'not_found'
        ? 'No such resource.'
        : code === 'method_not_allowed'
          ? `Method not allowed here; allowed: ${v.headers?.Allow ?? 'none'}.`
          : code === 'unsupported_media_type'
            ? 'Send application/json or multipart/form-data.'
            : (v.message ?? 'Invalid request.');
    return new ApiError(
      code,
      message,
      code === 'invalid_request' ? details : undefined,
      code === 'method_not_allowed' && v.headers?.Allow ? { Allow: v.headers.Allow } : {},
    );
  }
  return null;
}

export function sendError(res: Parameters<RequestHandler>[1], err: ApiError) {
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  const body: { code: ErrorCode; message: string; details?: ErrorDetail[] } = { code: err.code, message: err.message };
  if (err.details?.length) body.details = err.details;
  res.status(err.status).json({ error: body });
}

/**
 * A full disk or a spent disk quota, from the file system (spooling or storing an upload) or from
 * the database: 507 in the envelope, logged as a server error, so the operator hears of it.
 */
const STORAGE_FULL = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL', 'ER_RECORD_FILE_FULL', 'ER_DISK_FULL']);
export const isStorageFull = (err: unknown) => STORAGE_FULL.has(String((err as { code?: unknown } | null)?.code));

/** The one place a failure becomes an answer: always the envelope, never a stack trace or HTML. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    let apiError = translate(err);
    if (!apiError) {
      if (isConnectionError(err)) {
        logger.error({ reqId: req.id, err: { message: (err as Error).message, code: (err as { code?: string }).code } }, 'database unavailable');
        apiError = new ApiError('service_unavailable', 'The service is temporarily unavailable; retry later.', undefined, { 'Retry-After': '5' });
      } else {
        logger.error({ reqId: req.id, err }, 'unexpected error');
        apiError = new ApiError('internal_error', `Internal error. Quote the X-Request-Id ${String(req.id)} when you contact support.`);
      }
    } else if (apiError.status >= 500) {
      logger.error({ reqId: req.id, err }, 'server error');
    }
    // Every 401 carries its challenge (RFC 6750); both the API key and the window token are Bearer credentials.
    if (apiError.status === 401 && !res.hasHeader('WWW-Authenticate')) {
      res.setHeader('WWW-Authenticate', req.headers.authorization ? 'Bearer error="invalid_token"' : 'Bearer');
    }
    sendError(res, apiError);
  };
}

export const notFoundHandler: RequestHandler = (_req, _res, next) => next(new ApiError('not_found', 'No such resource.'));
