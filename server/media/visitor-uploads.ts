import type { Request, RequestHandler } from 'express';
import { ApiError } from '../platform/errors';
import type { RateLimiter, Spent } from '../http/rate-limit/limiter';
import { clientIpBucket } from '../http/rate-limit/client-ip';
import type { UploadGuard } from '../http/bodies';
import { checkFileAllowed, filesOffError, siteQuotaError, VisitorFiles } from './visitor-files';
import { expectedFileBytes, HOUR_MS, limitOf, nextGrant } from './quota';

/** The smallest extra budget an upload asks for once it has used what it was granted. */
export const GRANT_STEP = 1024 * 1024;

function clientIpQuotaError(what: 'messages' | 'file bytes', retryAfterSeconds: number): ApiError {
  return new ApiError('quota_exceeded', `Too many ${what} from this network in the last hour; retry in ${retryAfterSeconds} s.`, undefined, {
    'Retry-After': String(retryAfterSeconds),
  });
}

/** More than a limit allows in a whole period can never be sent: 413, not a 429 whose retry fails again. */
function neverFits(limit: number, what: string): ApiError {
  return new ApiError('payload_too_large', `These files are larger than ${what} (${limit} bytes); send smaller or fewer files.`);
}

function contentLength(req: Request): number | undefined {
  const value = req.headers['content-length'];
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}

/**
 * The chat window's quotas on a visitor's message, before its body is read (docs/window.md, Visitor files):
 * messages an hour per client IP over all visitors; for a multipart body the site's setting
 * and what its quotas and the client IP's hourly file bytes leave, judged from Content-Length. Then,
 * as the file bytes arrive (`req.uploadGuard`, see multipartBody), the same limits on the bytes
 * themselves: an upload that passes them stops there and leaves nothing behind. The client IP's
 * budget is spent as the bytes are granted; what the request did not use goes back when it ends.
 * The site's quotas are charged for good where the files are stored (VisitorFiles.charge).
 */
export function visitorUploadQuotas(opts: { limiter: RateLimiter; visitorFiles: VisitorFiles; now: () => number }): RequestHandler {
  const { limiter, visitorFiles, now } = opts;
  const limits = visitorFiles.limits;
  return async (req, res, next) => {
    try {
      // Only a visitor the token step let through is counted; anything else is answered by the
      // validator or the route (a malformed site id in the path has no visitor).
      const visitor = req.windowVisitor;
      if (!visitor) return next();
      const clientIp = clientIpBucket(req.ip);
      if (limits.messagesPerHourPerClientIp > 0) {
        const m = await limiter.spend(`visitor-messages:${clientIp}`, 1, limits.messagesPerHourPerClientIp, HOUR_MS);
        if (!m.allowed) throw clientIpQuotaError('messages', m.retryAfterSeconds);
      }
      if (!req.is('multipart/form-data')) return next();

      const { settings, room } = await visitorFiles.state(visitor.siteId);
      const expected = expectedFileBytes(contentLength(req));
      const perHour = limitOf(limits.bytesPerHourPerClientIp);
      const perDay = limitOf(limits.bytesPerDayPerSite);
      const tooLarge = (bytes: number) => {
        if (bytes > perHour) throw neverFits(perHour, 'one network may send in an hour');
        if (bytes > perDay) throw neverFits(perDay, 'the site takes in a day');
      };
      tooLarge(expected);
      // A body too large to be text alone carries a file: refused before it is read.
      if (expected > 0 && !settings.enabled) throw filesOffError();
      if (expected > room.bytes) throw siteQuotaError(room.binding!, now());

      const bucket = `visitor-file-bytes:${clientIp}`;
      const budget = limitOf(limits.bytesPerHourPerClientIp);
      const spends: { spent: Spent; amount: number }[] = [];
      let granted = budget === Infinity ? Infinity : 0;
      const take = async (amount: number) => {
        const spent = await limiter.spend(bucket, amount, budget, HOUR_MS);
        if (spent.allowed) {
          spends.push({ spent, amount });
          granted += amount;
        }
        return spent;
      };
      if (expected > 0 && granted < expected) {
        const first = await take(expected);
        if (!first.allowed) throw clientIpQuotaError('file bytes', first.retryAfterSeconds);
      }

      let received = 0;
      const grow = async (total: number) => {
        const needed = total - granted;
        let spent = await take(nextGrant(total, granted, GRANT_STEP));
        if (!spent.allowed && needed < GRANT_STEP) spent = await take(needed);
        if (!spent.allowed) throw clientIpQuotaError('file bytes', spent.retryAfterSeconds);
      };
      const guard: UploadGuard = {
        checkPart: (mimeType) => checkFileAllowed(settings, mimeType),
        received: (total) => {
          received = total;
          tooLarge(total);
          if (total > room.bytes) throw siteQuotaError(room.binding!, now());
          if (total > granted) return grow(total);
        },
      };
      req.uploadGuard = guard;
      res.once('close', () => {
        // Unused budget goes back, newest grant first; a refund never fails the request.
        let unused = granted - received;
        for (const { spent, amount } of spends.reverse()) {
          if (unused <= 0) break;
          const back = Math.min(unused, amount);
          unused -= back;
          void spent.refund(back);
        }
      });
      next();
    } catch (err) {
      next(err);
    }
  };
}
