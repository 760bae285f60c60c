import { ApiError } from '../platform/errors';
import { hmacHex, randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { clientIpBucket } from '../http/rate-limit/client-ip';
import { normaliseEmail } from './passwords';

/**
 * Password guesses are limited per email (whether or not it has an account, so a 429 does not tell
 * either) and per client IP (IPv6 by /64). A browser that signed in as the account before carries a
 * device cookie (OWASP's "device cookie" lockout defence) and spends a budget of its own instead of
 * the email's, so whoever fails against an email locks out only clients the account never used. A
 * signed-in password proof (password change, re-authentication) spends the account's own budget,
 * never the sign-in one. All are budgets of the shared limiter, in Redis with REDIS_URL, so every
 * instance counts the same guesses.
 */
export const SIGN_IN_LIMITS = {
  perEmail: { limit: 10, windowMs: 15 * 60_000 },
  perAddress: { limit: 100, windowMs: 15 * 60_000 },
  /** One browser's device cookie: a cookie that fails this often counts as no cookie (locked). */
  perDevice: { limit: 10, windowMs: 15 * 60_000 },
  /** Password proofs of a signed-in account (a stolen session cannot guess at speed either). */
  perAccount: { limit: 10, windowMs: 15 * 60_000 },
};

/** The device cookie lives long: it only says "this browser signed in as this account before". */
export const DEVICE_COOKIE_MAX_AGE_SECONDS = 365 * 24 * 3600;
const NONCE = /^[0-9A-Za-z]{22,32}$/;

const tooMany = (seconds: number, what = 'sign-in attempts') =>
  new ApiError('rate_limit_exceeded', `Too many ${what}; retry in ${Math.max(1, seconds)} s.`, undefined, {
    'Retry-After': String(Math.max(1, seconds)),
  });

/** One counted password check: given back when it succeeded, or when the hash was never run (503). */
export interface Attempt {
  succeeded(): Promise<void>;
  /** Runs the check and settles the attempt: a success gives it back, and so does a 503 (no hash was run). */
  run<T>(check: () => Promise<T>): Promise<T>;
}

function attemptOf(giveBack: (all: boolean) => Promise<void>): Attempt {
  return {
    succeeded: () => giveBack(false),
    async run(check) {
      try {
        const result = await check();
        await giveBack(false);
        return result;
      } catch (err) {
        // A full hashing queue refused before any work: the person retrying must not lock themself out.
        if (err instanceof ApiError && err.code === 'service_unavailable') await giveBack(true);
        throw err;
      }
    },
  };
}

export type SignInThrottle = ReturnType<typeof createSignInThrottle>;

/** `deviceKey`: a sub-key of the master key, so every instance can check every instance's cookies. */
export function createSignInThrottle(limiter: RateLimiter, deviceKey: Buffer) {
  const emailHash = (email: string) => sha256Hex(normaliseEmail(email));
  const macOf = (email: string, nonce: string) => hmacHex(deviceKey, `device-cookie\n${emailHash(email)}\n${nonce}`);

  /** The nonce of a device cookie made for this email by this service, or undefined. */
  function deviceNonce(cookie: string | undefined, email: string): string | undefined {
    if (!cookie || cookie.length > 200) return undefined;
    const [nonce, mac, extra] = cookie.split('.');
    if (extra !== undefined || !nonce || !mac || !NONCE.test(nonce)) return undefined;
    return safeEqual(mac, macOf(email, nonce)) ? nonce : undefined;
  }

  /** Forgot password's budget per client IP: requests and uses of links alike. */
  async function resetLink(ip: string | undefined): Promise<void> {
    const { perAddress } = SIGN_IN_LIMITS;
    const byAddress = await limiter.spend(`reset:${clientIpBucket(ip)}`, 1, perAddress.limit, perAddress.windowMs);
    if (!byAddress.allowed) throw tooMany(byAddress.retryAfterSeconds, 'password reset requests');
  }

  return {
    /** A new device cookie value binding the account's email to a random nonce. */
    deviceCookieFor(email: string): string {
      const nonce = randomBase62(16);
      return `${nonce}.${macOf(email, nonce)}`;
    },

    /**
     * Counts one sign-in password attempt for `email` from `ip`, or throws 429. Counted before the
     * password is checked, so parallel guesses cannot get past the limit. With a valid device cookie
     * for this email the device's budget is spent instead of the email's, until the device has
     * failed too often itself.
     */
    async attempt(email: string, ip: string | undefined, deviceCookie?: string): Promise<Attempt> {
      const { perEmail, perAddress, perDevice } = SIGN_IN_LIMITS;
      const byAddress = await limiter.spend(`signin:${clientIpBucket(ip)}`, 1, perAddress.limit, perAddress.windowMs);
      if (!byAddress.allowed) throw tooMany(byAddress.retryAfterSeconds);
      const nonce = deviceNonce(deviceCookie, email);
      if (nonce) {
        const byDevice = await limiter.spend(`signin:device:${nonce}`, 1, perDevice.limit, perDevice.windowMs);
        if (byDevice.allowed) return attemptOf(async (all) => Promise.all([byDevice.refund(1), all && byAddress.refund(1)]).then(() => undefined));
      }
      const byEmail = await limiter.spend(`signin:email:${emailHash(email)}`, 1, perEmail.limit, perEmail.windowMs);
      if (!byEmail.allowed) throw tooMany(byEmail.retryAfterSeconds);
      return attemptOf(async (all) => Promise.all([byEmail.refund(1), all && byAddress.refund(1)]).then(() => undefined));
    },

    /**
     * Counts one forgot-password request, or throws 429: per email (known or not, so a 429 tells
     * nothing) and per client IP, with sign-in's limits on budgets of their own, so asking for links
     * never locks anybody out of signing in.
     */
    async resetRequest(email: string, ip: string | undefined): Promise<void> {
      const { perEmail } = SIGN_IN_LIMITS;
      await resetLink(ip);
      const byEmail = await limiter.spend(`reset:email:${emailHash(email)}`, 1, perEmail.limit, perEmail.windowMs);
      if (!byEmail.allowed) throw tooMany(byEmail.retryAfterSeconds, 'password reset requests');
    },

    /** Counts one use of a reset link by the client IP, or throws 429. */
    resetLink,

    /**
     * Counts one password proof of a signed-in account (password change, re-authentication), or
     * throws 429: its own budget, so a spent sign-in budget never blocks it.
     */
    async proof(accountId: string): Promise<Attempt> {
      const { perAccount } = SIGN_IN_LIMITS;
      const spent = await limiter.spend(`password-proof:${accountId}`, 1, perAccount.limit, perAccount.windowMs);
      if (!spent.allowed) throw tooMany(spent.retryAfterSeconds, 'password attempts');
      return attemptOf(() => spent.refund(1));
    },
  };
}
