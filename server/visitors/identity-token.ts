import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { ApiError } from '../platform/errors';
import { Attribute, checkAttributes, cleanText } from './context-rules';

/**
 * Identity tokens (docs/window.md, "Identity tokens"): a short-lived JWT the customer's server signs
 * with the site's identity secret (HS256, the secret's text as the key, as `jsonwebtoken.sign(claims,
 * secret)` uses it), which the page passes to the window instead of `userId` and `userHash`. It
 * says who the visitor is (`sub`) and, vouched for by the same signature, their `name`, `email` and
 * up to 20 custom `attributes`. Checked here with a clock passed in, so the rules are tested
 * without waiting: HS256 only (`alg: none` and every other algorithm are refused before the
 * signature is even looked at), `exp` required and at most an hour ahead, a minute of clock skew
 * either way, `aud` (when present) the site's id.
 */

/** The longest an identity token may live: a leaked one is good for at most this long. */
export const IDENTITY_TOKEN_MAX_SECONDS = 3600;
/** Tolerated difference between the customer's server's clock and ours. */
export const IDENTITY_TOKEN_SKEW_SECONDS = 60;
const USER_ID = /^[\x21-\x7e]{1,120}$/;
export const EMAIL = /^[^\s@<>()[\]\\,;:"]{1,64}@[^\s@<>()[\]\\,;:"]{1,189}$/;

export interface IdentityClaims {
  userId: string;
  /** Absent when the token does not say; the stored value then stays. */
  name?: string;
  email?: string;
  attributes: Attribute[];
  expiresAt: number; // ms
}

const refused = (why: string) => new ApiError('unauthorized', `The identity token was refused: ${why}.`);

/**
 * The user id an identity token names, read without checking anything: the gateway reads the
 * site's settings for that visitor (its revocation) before the check, as it does for `userId`.
 * Null when the token is not readable.
 */
export function claimedUserId(token: string): string | null {
  try {
    const sub = decodeJwt(token).sub;
    return typeof sub === 'string' && USER_ID.test(sub) ? sub : null;
  } catch {
    return null;
  }
}

/** The claims of an identity token signed with `secret` for site `siteId` and valid at `now` (ms); a 401 saying why otherwise. */
export async function verifyIdentityToken(token: string, secret: string, opts: { now: number; siteId: string }): Promise<IdentityClaims> {
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch {
    throw refused('it is not a JWT (header.payload.signature, base64url)');
  }
  // Decided on the header alone, before any key is used: no `none`, no RS256 with the secret as a "public key".
  if (alg !== 'HS256') throw refused(`the algorithm must be HS256, not ${typeof alg === 'string' ? alg : 'missing'}`);
  const nowSeconds = Math.floor(opts.now / 1000);
  let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
  try {
    ({ payload } = await jwtVerify(token, new TextEncoder().encode(secret), {
      algorithms: ['HS256'],
      currentDate: new Date(opts.now),
      clockTolerance: IDENTITY_TOKEN_SKEW_SECONDS,
      requiredClaims: ['exp', 'sub'],
    }));
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_JWT_EXPIRED') throw refused('it has expired (exp); sign a new one for each page');
    if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw refused("its signature does not match the site's identity secret");
    if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') throw refused((err as Error).message.replace(/\.$/, ''));
    throw refused('it is not a valid JWT');
  }
  const exp = payload.exp!;
  if (exp > nowSeconds + IDENTITY_TOKEN_MAX_SECONDS + IDENTITY_TOKEN_SKEW_SECONDS)
    throw refused('exp is more than an hour ahead; identity tokens are short-lived');
  if (typeof payload.iat === 'number' && payload.iat > nowSeconds + IDENTITY_TOKEN_SKEW_SECONDS) throw refused('iat is in the future');
  if (payload.aud !== undefined) {
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (!audiences.includes(opts.siteId)) throw refused('aud names another site');
  }
  const sub = payload.sub!;
  if (!USER_ID.test(sub)) throw refused('sub (the user id) is 1 to 120 printable ASCII characters without spaces');
  const claims: IdentityClaims = { userId: sub, attributes: [], expiresAt: exp * 1000 };
  if (payload.name !== undefined && payload.name !== null) {
    if (typeof payload.name !== 'string' || [...payload.name].length > 200) throw refused('name is text of at most 200 characters');
    claims.name = cleanText(payload.name, 200);
  }
  if (payload.email !== undefined && payload.email !== null) {
    if (typeof payload.email !== 'string' || !EMAIL.test(payload.email)) throw refused('email is not an email address');
    claims.email = payload.email;
  }
  try {
    claims.attributes = checkAttributes(payload.attributes ?? undefined, '/attributes');
  } catch (err) {
    throw refused(err instanceof ApiError ? err.message.replace(/\.$/, '') : 'attributes are not valid');
  }
  return claims;
}
