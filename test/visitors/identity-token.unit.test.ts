/**
 * Identity tokens (server/visitors/identity-token.ts): the claim checks, with the clock passed in,
 * against tokens made here the way a customer's server makes them (jose's SignJWT, HS256 with the
 * identity secret's text as the key), and against forged ones made byte by byte.
 */
import { SignJWT, type JWTPayload } from 'jose';
import { createHmac } from 'node:crypto';
import { claimedUserId, IDENTITY_TOKEN_MAX_SECONDS, IDENTITY_TOKEN_SKEW_SECONDS, verifyIdentityToken } from '../../server/visitors/identity-token';
import { ApiError } from '../../server/platform/errors';

const SECRET = 'wis_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG';
const SITE = 'ws_01jd8x3r5k0000000000000000';
const NOW = Date.UTC(2026, 10, 22, 18, 43, 0);
const nowS = Math.floor(NOW / 1000);

const b64 = (v: object | string) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** A token as the customer's server signs it. */
async function sign(claims: JWTPayload, opts: { secret?: string; alg?: string } = {}) {
  return new SignJWT(claims).setProtectedHeader({ alg: opts.alg ?? 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(opts.secret ?? SECRET));
}

/** A token made by hand: any header, any payload, a signature of our choosing. */
function handMade(header: object, payload: object, signature: string) {
  return `${b64(header)}.${b64(payload)}.${signature}`;
}

const verify = (token: string, at = NOW, siteId = SITE) => verifyIdentityToken(token, SECRET, { now: at, siteId });

async function refusal(token: string, at = NOW, siteId = SITE): Promise<string> {
  try {
    await verify(token, at, siteId);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('unauthorized');
    return (err as ApiError).message;
  }
  throw new Error('the token was accepted');
}

test('a token signed with the identity secret gives its user, name, email and attributes', async () => {
  const token = await sign({
    sub: 'u-42',
    exp: nowS + 600,
    iat: nowS,
    aud: SITE,
    name: 'Ada Lovelace',
    email: 'ada@example.com',
    attributes: { plan: 'pro', seats: 12, trial: false },
  });
  expect(await verify(token)).toEqual({
    userId: 'u-42',
    name: 'Ada Lovelace',
    email: 'ada@example.com',
    attributes: [
      { name: 'plan', value: 'pro' },
      { name: 'seats', value: 12 },
      { name: 'trial', value: false },
    ],
    expiresAt: (nowS + 600) * 1000,
  });
  expect(claimedUserId(token)).toBe('u-42');
});

test('name, email and attributes are optional: left out, nothing is said about them', async () => {
  const claims = await verify(await sign({ sub: 'u-1', exp: nowS + 60 }));
  expect(claims).toEqual({ userId: 'u-1', attributes: [], expiresAt: (nowS + 60) * 1000 });
  expect('name' in claims).toBe(false);
});

test('exp is required, checked against the clock passed in with a minute of skew, and at most an hour ahead', async () => {
  expect(await refusal(await sign({ sub: 'u' }))).toMatch(/exp/);
  const token = await sign({ sub: 'u', exp: nowS + 300 });
  await expect(verify(token, NOW + 300_000 + IDENTITY_TOKEN_SKEW_SECONDS * 1000 - 1000)).resolves.toBeTruthy();
  expect(await refusal(token, NOW + 300_000 + IDENTITY_TOKEN_SKEW_SECONDS * 1000 + 1000)).toMatch(/expired/);
  await expect(verify(await sign({ sub: 'u', exp: nowS + IDENTITY_TOKEN_MAX_SECONDS }))).resolves.toBeTruthy();
  expect(await refusal(await sign({ sub: 'u', exp: nowS + IDENTITY_TOKEN_MAX_SECONDS + IDENTITY_TOKEN_SKEW_SECONDS + 1 }))).toMatch(/more than an hour/);
  expect(await refusal(await sign({ sub: 'u', exp: nowS + 60, iat: nowS + IDENTITY_TOKEN_SKEW_SECONDS + 5 }))).toMatch(/iat/);
  expect(await refusal(await sign({ sub: 'u', exp: nowS + 600, nbf: nowS + 300 }))).toMatch(/nbf/);
});

test('alg none, another HMAC, and an RSA-looking header are refused before any signature is checked', async () => {
  const claims = { sub: 'u', exp: nowS + 60 };
  expect(await refusal(handMade({ alg: 'none', typ: 'JWT' }, claims, ''))).toMatch(/HS256, not none/);
  expect(await refusal(handMade({ alg: 'None' }, claims, ''))).toMatch(/HS256/);
  expect(await refusal(handMade({ typ: 'JWT' }, claims, ''))).toMatch(/HS256, not missing/);
  expect(await refusal(await sign(claims, { alg: 'HS512' }))).toMatch(/HS256, not HS512/);
  // RS256 "signed" with the secret as an HMAC key: the classic algorithm confusion.
  const body = `${b64({ alg: 'RS256' })}.${b64(claims)}`;
  expect(await refusal(`${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`)).toMatch(/HS256, not RS256/);
});

test('a wrong secret (a forged token, another site, a rotated secret) or an altered payload is refused', async () => {
  const claims = { sub: 'u', exp: nowS + 60 };
  expect(await refusal(await sign(claims, { secret: 'wis_another_site_secret_000000000000000000000' }))).toMatch(/signature/);
  const good = await sign(claims);
  const [h, , s] = good.split('.');
  expect(await refusal(`${h}.${b64({ sub: 'admin', exp: nowS + 60 })}.${s}`)).toMatch(/signature/);
  expect(await refusal(`${h}.${b64(claims)}.`)).toMatch(/signature|valid/);
  expect(await refusal('not-a-jwt')).toMatch(/not a JWT/);
  expect(await refusal(`${h}.!!!.${s}`)).toMatch(/valid JWT|signature/);
});

test('aud, when present, must name this site', async () => {
  await expect(verify(await sign({ sub: 'u', exp: nowS + 60, aud: [SITE, 'other'] }))).resolves.toBeTruthy();
  expect(await refusal(await sign({ sub: 'u', exp: nowS + 60, aud: 'ws_01jd8x3r5k1111111111111111' }))).toMatch(/aud/);
});

test('claims of the wrong shape are refused with what is wrong', async () => {
  const base = { exp: nowS + 60 };
  expect(await refusal(await sign({ ...base }))).toMatch(/sub/);
  expect(await refusal(await sign({ ...base, sub: 'has space' }))).toMatch(/sub/);
  expect(await refusal(await sign({ ...base, sub: 'x'.repeat(121) }))).toMatch(/sub/);
  expect(await refusal(await sign({ ...base, sub: 'u', name: 42 }))).toMatch(/name/);
  expect(await refusal(await sign({ ...base, sub: 'u', email: 'not-an-address' }))).toMatch(/email/);
  const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`a${i}`, i]));
  expect(await refusal(await sign({ ...base, sub: 'u', attributes: many }))).toMatch(/at most 20/);
  expect(await refusal(await sign({ ...base, sub: 'u', attributes: { nested: { a: 1 } } }))).toMatch(/text, a number or a boolean/);
  expect(await refusal(await sign({ ...base, sub: 'u', attributes: { 'bad name!': 1 } }))).toMatch(/name/);
  expect(await refusal(await sign({ ...base, sub: 'u', attributes: ['a'] }))).toMatch(/object/);
  // Twenty is the limit, not one less.
  const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`a${i}`, i]));
  expect((await verify(await sign({ ...base, sub: 'u', attributes: twenty }))).attributes).toHaveLength(20);
});

test('a name loses the characters that would change how the panel reads', async () => {
  const claims = await verify(await sign({ sub: 'u', exp: nowS + 60, name: '  Ada\u202e Love\nlace ' }));
  expect(claims.name).toBe('Ada Love lace');
});

test('claimedUserId reads sub without checking anything, and null from what it cannot read', async () => {
  expect(claimedUserId(handMade({ alg: 'none' }, { sub: 'u-9' }, ''))).toBe('u-9');
  expect(claimedUserId('garbage')).toBeNull();
  expect(claimedUserId(handMade({ alg: 'HS256' }, { sub: 'with space' }, 'x'))).toBeNull();
});
