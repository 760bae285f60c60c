import type { Request, RequestHandler } from 'express';
import express from 'express';
import multer from 'multer';
import path from 'node:path';
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import { ApiError } from '../platform/errors';
import { ulidBody } from '../platform/ids';
import type { AccessService } from '../access/service';
import type { Scope } from '../access/scopes';
import type { RateLimiter, RateDecision } from './rate-limit/limiter';
import type { IdempotencyService } from '../idempotency/service';
import { sendError } from './error-handler';
import './request-context';

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** A caller-supplied X-Request-Id is kept when harmless (no log injection), else we make one. */
export function requestId(req: Request): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : `req_${ulidBody()}`;
}

export const securityHeaders: RequestHandler = (req, res, next) => {
  res.setHeader('X-Request-Id', String(req.id));
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
  next();
};

/** The public API answers no cross-origin request: strip anything that would look like CORS. */
export const noCors: RequestHandler = (_req, res, next) => {
  const setHeader = res.setHeader.bind(res);
  res.setHeader = ((name: string, value: string | number | readonly string[]) =>
    /^access-control-/i.test(name) ? res : setHeader(name, value)) as typeof res.setHeader;
  next();
};

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
  if (req.path.startsWith('/schemas/')) return true;
  return req.method === 'GET' && req.path.startsWith('/media/') && !req.headers.authorization && 'signature' in req.query;
}

/**
 * Authentication, then the per-key rate limit. Requests without a valid key are limited per client
 * address, so keys cannot be guessed at speed.
 */
export function authenticate(access: AccessService, limiter: RateLimiter): RequestHandler {
  return async (req, res, next) => {
    try {
      if (isKeyless(req)) {
        const d = await limiter.hit(`ip:${req.ip}`);
        if (!d.allowed) throw rateLimited(d);
        req.mediaLink = req.path.startsWith('/media/');
        return next();
      }
      const header = req.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
      if (!match) {
        const d = await limiter.hit(`ip:${req.ip}`);
        if (!d.allowed) throw rateLimited(d);
        throw new ApiError('unauthorized', 'Missing API key: send Authorization: Bearer wck_...');
      }
      try {
        req.principal = await access.authenticate(match[1]);
      } catch (err) {
        if (err instanceof ApiError && err.code === 'unauthorized') {
          const d = await limiter.hit(`ip:${req.ip}`);
          if (!d.allowed) throw rateLimited(d);
        }
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

/** JSON bodies: 64 KiB, strict UTF-8 (invalid bytes are refused rather than silently replaced). */
export const jsonBody = express.json({
  limit: 64 * 1024,
  type: ['application/json', 'application/*+json'],
  verify: (_req, _res, buf) => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(buf);
    } catch {
      const err = new Error('The request body is not valid UTF-8.') as Error & { type: string };
      err.type = 'entity.verify.failed';
      throw err;
    }
  },
});

/**
 * multipart/form-data for replies with files: spooled to DATA_DIR/tmp (never whole in memory),
 * limits from DECISIONS. Leftover spool files are removed when the answer is sent.
 */
export function multipartBody(dataDir: string, maxFileBytes: number): RequestHandler {
  const tmp = path.join(dataDir, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  const upload = multer({
    storage: multer.diskStorage({ destination: tmp, filename: (_req, _file, cb) => cb(null, `upload_${ulidBody()}`) }),
    // busboy flags a file that reaches the limit, so allow one byte more and check `size` below.
    limits: { fileSize: maxFileBytes + 1, files: 10, fields: 10, fieldSize: 64 * 1024, parts: 30, headerPairs: 100 },
  }).any();
  return (req, res, next) => {
    if (!req.is('multipart/form-data')) return next();
    res.on('close', () => {
      for (const f of (req.files as Express.Multer.File[] | undefined) ?? []) fs.rm(f.path, { force: true }, () => undefined);
    });
    upload(req, res, (err?: unknown) => {
      if (err) return next(err);
      const files = (req.files as Express.Multer.File[]) ?? [];
      const wrong = files.find((f) => f.fieldname !== 'file');
      if (wrong) return next(new ApiError('invalid_request', `Unexpected file field "${wrong.fieldname}"; send files as "file".`, [{ path: `/body/${wrong.fieldname}`, message: 'unexpected file field' }]));
      const big = files.find((f) => f.size > maxFileBytes);
      if (big) return next(new ApiError('payload_too_large', `The file "${big.originalname}" is larger than ${maxFileBytes} bytes.`));
      next();
    });
  };
}

async function fileDigest(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Idempotency-Key on the reply: a repeat answers the recorded answer with Idempotent-Replayed,
 * a concurrent repeat is 409, another request under the same key is 422. The handler records a
 * success in its own transaction (req.idempotency.completeIn); other answers are recorded here.
 */
export function idempotency(service: IdempotencyService): RequestHandler {
  return async (req, res, next) => {
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || !req.principal) return next();
    try {
      const files = ((req.files as Express.Multer.File[] | undefined) ?? []).map((f) => f.path);
      const fingerprint = createHash('sha256')
        .update(`${req.method} ${req.baseUrl}${req.path}\n${canonical(req.body ?? null)}\n`)
        .update((await Promise.all(files.map(fileDigest))).join(','))
        .digest('hex');
      const begun = await service.begin(req.principal.keyId, key, fingerprint);
      if (begun.kind === 'replay') {
        res.setHeader('Idempotent-Replayed', 'true');
        res.status(begun.status).type('application/json').send(begun.body);
        return;
      }
      const handle = begun.handle;
      req.idempotency = handle;
      const json = res.json.bind(res);
      res.json = (body: unknown) => {
        if (!handle.completed) {
          handle.finish(res.statusCode, body).then(
            () => json(body),
            (err) => {
              req.log?.error({ err }, 'could not record the idempotent answer');
              json(body);
            },
          );
          return res;
        }
        return json(body);
      };
      next();
    } catch (err) {
      if (err instanceof ApiError) return sendError(res, err);
      next(err);
    }
  };
}
