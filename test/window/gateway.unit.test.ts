/**
 * The gateway's rules without a database: the site's one read is a fake, the clock is passed in.
 */
import { randomBytes } from 'node:crypto';
import { ApiError } from '../../server/platform/errors';
import {
  admit,
  Claimant,
  createWindowGateway,
  gatewayOrigin,
  missingTokenRefusal,
  recentOrigins,
  SiteWindowAccess,
  tokenAnswer,
  windowRefusal,
} from '../../server/window/gateway';
import { createWindowTokens, identityHash, TokenRefused, WindowClaims, WINDOW_SESSION_MAX_SECONDS } from '../../server/window/tokens';

const SECRET = 'wis_test-secret';
const SERVICE = 'https://chat.example.net';
const PAGE = 'https://shop.example';
const SITE = 'ws_0123456789abcdefghjkmnpqrs';

const site = (over: Partial<SiteWindowAccess> = {}): SiteWindowAccess => ({
  originAllowed: true,
  identityMode: 'optional',
  identityGeneration: 'gen1',
  revokedBefore: null,
  identitySecret: () => SECRET,
  ...over,
});

const claims = (over: Partial<WindowClaims> = {}): WindowClaims => ({
  siteId: SITE,
  visitorId: 'vis_1',
  origin: PAGE,
  verified: false,
  identityGeneration: null,
  sessionStart: 1_000,
  issuedAt: 1_000,
  expiresAt: 601_000,
  ...over,
});

/** The ApiError a call throws, as its code and message. */
function refusalOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return { code: (err as ApiError).code, message: (err as ApiError).message };
  }
  throw new Error('expected a refusal');
}

describe('windowRefusal: whether a valid token may still be used', () => {
  test('a token of an allowed origin, not revoked, matching the identity mode may', () => {
    expect(windowRefusal(site(), claims())).toBeNull();
    expect(windowRefusal(site({ identityMode: 'enforce' }), claims({ verified: true, identityGeneration: 'gen1' }))).toBeNull();
  });

  test('a missing site, a removed origin, a revocation at or after the session start may not', () => {
    expect(windowRefusal(null, claims())).toBe('No such site.');
    expect(windowRefusal(site({ originAllowed: false }), claims())).toMatch(/no longer allowed/);
    expect(windowRefusal(site({ revokedBefore: 1_000 }), claims({ sessionStart: 1_000 }))).toMatch(/revoked/);
    expect(windowRefusal(site({ revokedBefore: 999 }), claims({ sessionStart: 1_000 }))).toBeNull();
  });

  test('identity modes: off refuses verified tokens, enforce anonymous ones; a rotated secret refuses verified ones', () => {
    expect(windowRefusal(site({ identityMode: 'off' }), claims({ verified: true, identityGeneration: 'gen1' }))).toMatch(/no longer verifies/);
    expect(windowRefusal(site({ identityMode: 'off' }), claims())).toBeNull();
    expect(windowRefusal(site({ identityMode: 'enforce' }), claims())).toMatch(/requires identity verification/);
    expect(windowRefusal(site({ identityGeneration: 'gen2' }), claims({ verified: true, identityGeneration: 'gen1' }))).toMatch(/identity secret changed/);
  });
});

describe('gatewayOrigin: the page a gateway request proves', () => {
  test("a host page's own Origin, with or without naming itself", () => {
    expect(gatewayOrigin(PAGE, undefined, SERVICE)).toBe(PAGE);
    expect(gatewayOrigin(PAGE, PAGE, SERVICE)).toBe(PAGE);
  });
  test('the panel (the service origin) names its host page', () => {
    expect(gatewayOrigin(SERVICE, PAGE, SERVICE)).toBe(PAGE);
    expect(gatewayOrigin(SERVICE, undefined, SERVICE)).toBeNull();
  });
  test('no Origin, or a host page naming another page, proves nothing', () => {
    expect(gatewayOrigin(undefined, PAGE, SERVICE)).toBeNull();
    expect(gatewayOrigin(PAGE, 'https://other.example', SERVICE)).toBeNull();
  });
});

describe('admit: the identity mode and revocations decide who comes in', () => {
  const userHash = identityHash(SECRET, 'u-42');
  const credential = (issuedAt: number): Claimant => ({
    kind: 'credential',
    credential: { siteId: SITE, visitorId: 'vis_old', issuedAt, expiresAt: issuedAt + 10_000 },
  });

  test('a matching identity hash makes a verified visitor, in optional and enforce modes (either case of hex)', () => {
    for (const identityMode of ['optional', 'enforce'] as const) {
      expect(admit(site({ identityMode }), { kind: 'identity', userId: 'u-42', userHash })).toEqual({ visitorId: 'user:u-42', verified: true });
      expect(admit(site({ identityMode }), { kind: 'identity', userId: 'u-42', userHash: userHash.toUpperCase() })).toEqual({
        visitorId: 'user:u-42',
        verified: true,
      });
    }
  });

  test('identities are refused when the site verifies none, when half given, or when the hash does not match', () => {
    expect(refusalOf(() => admit(site({ identityMode: 'off' }), { kind: 'identity', userId: 'u-42', userHash }))).toMatchObject({ code: 'invalid_request' });
    expect(refusalOf(() => admit(site({ identitySecret: () => null }), { kind: 'identity', userId: 'u-42', userHash }))).toMatchObject({
      code: 'invalid_request',
    });
    expect(refusalOf(() => admit(site(), { kind: 'identity', userId: 'u-42' }))).toEqual({ code: 'unauthorized', message: 'userId and userHash go together.' });
    expect(refusalOf(() => admit(site(), { kind: 'identity', userHash }))).toEqual({ code: 'unauthorized', message: 'userId and userHash go together.' });
    expect(refusalOf(() => admit(site(), { kind: 'identity', userId: 'u-43', userHash }))).toMatchObject({
      code: 'unauthorized',
      message: expect.stringMatching(/does not match/),
    });
  });

  test('anonymous visitors: new or with a credential, unless the site enforces identities', () => {
    expect(admit(site(), { kind: 'new' })).toEqual({ visitorId: null, verified: false });
    expect(admit(site({ identityMode: 'off' }), credential(5_000))).toEqual({ visitorId: 'vis_old', verified: false });
    expect(refusalOf(() => admit(site({ identityMode: 'enforce' }), { kind: 'new' }))).toMatchObject({
      code: 'unauthorized',
      message: expect.stringMatching(/requires identity/),
    });
    expect(refusalOf(() => admit(site({ identityMode: 'enforce' }), credential(5_000)))).toMatchObject({ message: expect.stringMatching(/requires identity/) });
  });

  test('a credential issued at or before a revocation is refused, a later one is not; a refused credential says why', () => {
    expect(refusalOf(() => admit(site({ revokedBefore: 5_000 }), credential(5_000)))).toMatchObject({
      code: 'unauthorized',
      message: expect.stringMatching(/credential was revoked/),
    });
    expect(admit(site({ revokedBefore: 4_999 }), credential(5_000)).visitorId).toBe('vis_old');
    const refusal = new TokenRefused('expired', 'The visitor credential has expired; start without it as a new visitor.');
    expect(refusalOf(() => admit(site(), { kind: 'refused-credential', refusal }))).toEqual({ code: 'unauthorized', message: refusal.message });
  });
});

test('tokenAnswer: the lifetime in seconds and a refresh with a fifth of it left', () => {
  const answer = tokenAnswer(claims({ issuedAt: 0, expiresAt: 600_000 }), 'wwt1.a.b', 'wvc1.c.d');
  expect(answer.data).toEqual({
    token: 'wwt1.a.b',
    tokenType: 'Bearer',
    expiresAt: '1970-01-01T00:10:00.000Z',
    expiresIn: 600,
    refreshAfter: 480,
    visitorId: 'vis_1',
    verified: false,
    visitorCredential: 'wvc1.c.d',
  });
});

test('missingTokenRefusal names why a request has no usable token', () => {
  expect(missingTokenRefusal(new TokenRefused('signature', 'altered'), undefined)).toBe('altered');
  expect(missingTokenRefusal(undefined, claims())).toMatch(/another origin/);
  expect(missingTokenRefusal(undefined, undefined)).toMatch(/^Missing window token/);
});

test('recentOrigins remembers an allowed origin for a minute of the clock it is given, within its bound', () => {
  let t = 0;
  const seen = recentOrigins(() => t, 2);
  seen.note(SITE, PAGE);
  expect(seen.has(SITE, PAGE)).toBe(true);
  expect(seen.has(SITE, 'https://other.example')).toBe(false);
  t = 59_999;
  expect(seen.has(SITE, PAGE)).toBe(true);
  t = 60_000;
  expect(seen.has(SITE, PAGE)).toBe(false);
  seen.note(SITE, 'https://a.example');
  seen.note(SITE, 'https://b.example');
  seen.note(SITE, 'https://c.example'); // at the bound: forgets everything before
  expect(seen.has(SITE, 'https://a.example')).toBe(false);
  expect(seen.has(SITE, 'https://c.example')).toBe(true);
});

describe('the gateway service, with a fake site read and a clock', () => {
  function setup(initial: SiteWindowAccess | null = site()) {
    const clock = { t: Date.UTC(2026, 0, 1) };
    const now = () => clock.t;
    const reads: { siteId: string; origin: string; visitorId: string }[] = [];
    const originLookups: string[] = [];
    let current = initial;
    const access = {
      async windowAccess(siteId: string, origin: string, visitorId: string) {
        reads.push({ siteId, origin, visitorId });
        return current;
      },
      isOriginAllowed: async (_siteId: string, origin: string) => {
        originLookups.push(origin);
        return true;
      },
    };
    const tokens = createWindowTokens({ windowTokens: randomBytes(32), visitorCredentials: randomBytes(32) }, now);
    const gateway = createWindowGateway({ access, tokens, now, serviceOrigin: SERVICE });
    return { clock, reads, originLookups, gateway, tokens, setSite: (s: SiteWindowAccess | null) => (current = s) };
  }

  test('issues an anonymous session: a new visitor, a credential, the read made for the page', async () => {
    const { gateway, reads, tokens } = setup();
    const answer = await gateway.issue(SITE, SERVICE, { hostOrigin: PAGE });
    expect(answer.data).toMatchObject({ tokenType: 'Bearer', expiresIn: 600, refreshAfter: 480, verified: false, visitorId: expect.stringMatching(/^vis_/) });
    expect(reads).toEqual([{ siteId: SITE, origin: PAGE, visitorId: '' }]);
    expect(tokens.verify(answer.data.token, SITE)).toMatchObject({ origin: PAGE, visitorId: answer.data.visitorId });
    expect(tokens.verifyVisitorCredential(answer.data.visitorCredential!, SITE).visitorId).toBe(answer.data.visitorId);
  });

  test('a credential brings the same visitor back; the read is made for it', async () => {
    const { gateway, reads } = setup();
    const first = await gateway.issue(SITE, PAGE, {});
    const again = await gateway.issue(SITE, PAGE, { visitorCredential: first.data.visitorCredential! });
    expect(again.data.visitorId).toBe(first.data.visitorId);
    expect(reads[1].visitorId).toBe(first.data.visitorId);
  });

  test('a verified visitor gets no credential and a token naming the secret generation', async () => {
    const { gateway, tokens } = setup();
    const answer = await gateway.issue(SITE, PAGE, { userId: 'u-1', userHash: identityHash(SECRET, 'u-1') });
    expect(answer.data).toMatchObject({ visitorId: 'user:u-1', verified: true, visitorCredential: null });
    expect(tokens.verify(answer.data.token, SITE)).toMatchObject({ verified: true, identityGeneration: 'gen1' });
  });

  test('pages that prove no allowed origin are refused before or by the read', async () => {
    const { gateway, setSite } = setup();
    await expect(gateway.issue(SITE, undefined, {})).rejects.toThrow(/own pages only/);
    await expect(gateway.issue(SITE, SERVICE, {})).rejects.toThrow(/own pages only/);
    setSite(site({ originAllowed: false }));
    await expect(gateway.issue(SITE, PAGE, {})).rejects.toThrow(/own pages only/);
    setSite(null);
    await expect(gateway.issue(SITE, PAGE, {})).rejects.toThrow(/own pages only/);
  });

  test('a revocation voids the session that began at its millisecond, and the credentials it handed out', async () => {
    const { gateway, clock, setSite } = setup();
    const answer = await gateway.issue(SITE, PAGE, {});
    const started = clock.t;
    const read = gateway.readToken(answer.data.token, SITE);
    if (!('claims' in read)) throw new Error('token refused');
    setSite(site({ revokedBefore: started }));
    expect(await gateway.refusalOf(read.claims)).toMatch(/revoked/);
    clock.t += 1_000;
    const refreshed = gateway.refresh(read.claims);
    await expect(gateway.issue(SITE, PAGE, { visitorCredential: refreshed.data.visitorCredential! })).rejects.toThrow(/credential was revoked/);
    // A new visitor starts after the revocation and may go on.
    const fresh = await gateway.issue(SITE, PAGE, {});
    const freshRead = gateway.readToken(fresh.data.token, SITE);
    expect('claims' in freshRead && (await gateway.refusalOf(freshRead.claims))).toBeNull();
  });

  test('refreshes keep the session start, so the session ends at its cap whatever the refreshes', async () => {
    const { gateway, clock } = setup();
    const answer = await gateway.issue(SITE, PAGE, {});
    const start = clock.t;
    let token = answer.data.token;
    for (let i = 0; i < 80; i++) {
      clock.t += 540_000; // every nine minutes, before each token expires
      const read = gateway.readToken(token, SITE);
      if (!('claims' in read)) {
        expect(read.refusal.reason).toBe('expired');
        expect(clock.t).toBeGreaterThanOrEqual(start + WINDOW_SESSION_MAX_SECONDS * 1000);
        return;
      }
      expect(read.claims.sessionStart).toBe(start);
      const next = gateway.refresh(read.claims);
      expect(Date.parse(next.data.expiresAt)).toBeLessThanOrEqual(start + WINDOW_SESSION_MAX_SECONDS * 1000);
      token = next.data.token;
    }
    throw new Error('the session never ended');
  });

  test('readToken tells a token of another site or an altered one from a valid one', async () => {
    const { gateway } = setup();
    const answer = await gateway.issue(SITE, PAGE, {});
    expect('claims' in gateway.readToken(answer.data.token, SITE)).toBe(true);
    const other = gateway.readToken(answer.data.token, 'ws_zzzzzzzzzzzzzzzzzzzzzzzzzz');
    expect('refusal' in other && other.refusal.reason).toBe('site');
    const altered = gateway.readToken(answer.data.token.slice(0, -2) + 'xx', SITE);
    expect('refusal' in altered && altered.refusal.reason).toBe('signature');
  });

  test('isOriginAllowed never looks up an origin longer than the document allows', async () => {
    const { gateway, originLookups } = setup();
    const longest = `https://${'a'.repeat(300 - 'https://'.length)}`;
    expect(await gateway.isOriginAllowed(SITE, longest)).toBe(true);
    expect(await gateway.isOriginAllowed(SITE, `${longest}b`)).toBe(false);
    expect(originLookups).toEqual([longest]);
  });
});
