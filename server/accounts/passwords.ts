import { randomBytes, timingSafeEqual } from 'node:crypto';
import { HashPool, sharedHashPool } from './hash-pool';

/** scrypt's cost parameters; the stored hash names its own, so old hashes verify after a change. */
export interface ScryptParams {
  /** CPU/memory cost, a power of two. */
  N: number;
  r: number;
  p: number;
}

/**
 * OWASP's Password Storage Cheat Sheet: scrypt with N=2^17, r=8, p=1 (128 MiB per hash). Each
 * hash runs on a thread of the hash pool (hash-pool.ts), never on the event loop nor on libuv's
 * thread pool, which file I/O needs.
 */
export const OWASP_SCRYPT: ScryptParams = { N: 2 ** 17, r: 8, p: 1 };

const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** Passwords are bounded so a request cannot make one hash cost more than another. */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** scrypt needs 128 * N * r bytes; Node's default cap (32 MiB) is below OWASP's N, so it is raised to twice the need. */
const maxmemOf = (p: ScryptParams) => 2 * 128 * p.N * p.r + 1024 * 1024;

function derive(pool: HashPool, password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  return pool.derive({ password: password.normalize('NFC'), salt, keyLength: KEY_BYTES, N: params.N, r: params.r, p: params.p, maxmem: maxmemOf(params) });
}

const FORMAT = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]{10,64})\$([A-Za-z0-9_-]{10,128})$/;

export interface PasswordHasher {
  readonly params: ScryptParams;
  /** `$scrypt$ln=17,r=8,p=1$<salt>$<hash>` (base64url), a fresh salt each time. */
  hash(password: string): Promise<string>;
  /** Constant-time comparison of the derived key; false for a malformed stored value. */
  verify(password: string, stored: string): Promise<boolean>;
  /**
   * Spends the time of one `verify` without a stored hash: a sign-in for an email with no account
   * costs what a wrong password costs, so timing does not tell which emails exist.
   */
  verifyNothing(password: string): Promise<void>;
}

/**
 * Every hash, known email or not, goes through `pool`: its queue bound applies to all alike, and a
 * full queue refuses with 503 before any work is done. Without a pool, the process's shared one.
 */
export function createPasswordHasher(params: ScryptParams = OWASP_SCRYPT, pool: HashPool = sharedHashPool()): PasswordHasher {
  const ln = Math.log2(params.N);
  if (!Number.isInteger(ln)) throw new Error('scrypt N must be a power of two');
  const hasher: PasswordHasher = {
    params,
    async hash(password) {
      const salt = randomBytes(SALT_BYTES);
      const key = await derive(pool, password, salt, params);
      return `$scrypt$ln=${ln},r=${params.r},p=${params.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
    },
    async verify(password, stored) {
      const m = FORMAT.exec(stored);
      if (!m) return false;
      const cost = { N: 2 ** Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
      const expected = Buffer.from(m[5], 'base64url');
      const key = await derive(pool, password, Buffer.from(m[4], 'base64url'), cost);
      return key.length === expected.length && timingSafeEqual(key, expected);
    },
    async verifyNothing(password) {
      const key = await derive(pool, password, randomBytes(SALT_BYTES), params);
      timingSafeEqual(key, key);
    },
  };
  return hasher;
}

/** Why a new password is refused, or null. Length only: ASVS 5.0 V6.2 asks for no composition rules. */
export function passwordProblem(password: string): string | null {
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) return `must be at least ${PASSWORD_MIN_LENGTH} characters`;
  if (length > PASSWORD_MAX_LENGTH) return `must be at most ${PASSWORD_MAX_LENGTH} characters`;
  return null;
}

/** Emails compare case-insensitively: stored trimmed, NFC and lower-cased, so the unique index holds on every engine. */
export function normaliseEmail(email: string): string {
  return email.trim().normalize('NFC').toLowerCase();
}
