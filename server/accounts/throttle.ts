import { ApiError } from '../platform/errors';
import { sha256Hex } from '../platform/crypto';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { clientIpBucket } from '../http/rate-limit/client-ip';
import { normaliseEmail } from './passwords';

/**
 * Password guesses are limited per email (whether or not it has an account, so a 429 does not tell
 * either) and per client IP (IPv6 by /64). Both are budgets of the shared limiter, in Redis
 * with REDIS_URL, so every instance counts the same guesses.
 */
export const SIGN_IN_LIMITS = {
  perEmail: { limit: 10, windowMs: 15 * 60_000 },
  perAddress: { limit: 100, windowMs: 15 * 60_000 },
};

const tooMany = (seconds: number) =>
  new ApiError('rate_limit_exceeded', `Too many sign-in attempts; retry in ${Math.max(1, seconds)} s.`, undefined, {
    'Retry-After': String(Math.max(1, seconds)),
  });

export type SignInThrottle = ReturnType<typeof createSignInThrottle>;

export function createSignInThrottle(limiter: RateLimiter) {
  return {
    /**
     * Counts one password attempt for `email` from `ip`, or throws 429. Counted before the password
     * is checked, so parallel guesses cannot get past the limit; `succeeded` gives the email's
     * attempt back, so a person signing in often is never locked out by their own successes.
     */
    async attempt(email: string, ip: string | undefined): Promise<{ succeeded(): Promise<void> }> {
      const { perEmail, perAddress } = SIGN_IN_LIMITS;
      const byAddress = await limiter.spend(`signin:${clientIpBucket(ip)}`, 1, perAddress.limit, perAddress.windowMs);
      if (!byAddress.allowed) throw tooMany(byAddress.retryAfterSeconds);
      const byEmail = await limiter.spend(`signin:email:${sha256Hex(normaliseEmail(email))}`, 1, perEmail.limit, perEmail.windowMs);
      if (!byEmail.allowed) throw tooMany(byEmail.retryAfterSeconds);
      return { succeeded: () => byEmail.refund(1) };
    },
  };
}
