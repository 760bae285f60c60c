/**
 * The visitor in context through the real entries (both engines): what the chat window reports
 * (`/window/v1/.../context`, `/visitor`), how it is kept (stripped, parsed, capped at 50 pages,
 * only for an open conversation, nothing with tracking off), identity tokens at the gateway
 * (verified name, email and attributes; forged, expired, `alg: none`, another site's and a rotated
 * secret's tokens refused), and the inbox's side panel (`getInboxVisitor`) with its live event.
 */
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { SignJWT, type JWTPayload } from 'jose';
import { createHarness, Harness, listenHttps } from '../helpers/harness';
import { allowOrigins, auth, getToken, openSse, ORIGIN, SseStream, TokenAnswer, w } from '../window/helpers';
import { M, memberWithToken, TEST_HASHER, withToken } from '../manage/helpers';

const CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';

let h: Harness;
let site: string;
let secret: string;
let owner: { id: string; token: string };
let agent: { id: string; token: string };

beforeAll(async () => {
  h = await createHarness({ passwordHasher: TEST_HASHER });
  site = h.site.id;
  await allowOrigins(h, site);
  secret = (await h.runtime.services.access.setIdentity(site, { mode: 'optional' })).identitySecret!;
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, site, 'agent@example.com', 'agent');
});
afterAll(() => h?.close());

const fromPage = (r: request.Test, t: TokenAnswer) => r.set('Origin', ORIGIN).set(auth(t.token));
async function say(t: TokenAnswer, content = 'hello', siteId = site) {
  const res = await fromPage(request(h.app).post(w(siteId, '/messages')), t).send({ content, clientMessageId: randomUUID() });
  expect(res.status).toBe(201);
  return res.body.data.conversation.id as string;
}
const report = (t: TokenAnswer, body: object, ua = CHROME, siteId = site) =>
  fromPage(request(h.app).post(w(siteId, '/context')), t)
    .set('User-Agent', ua)
    .send(body);
const details = (t: TokenAnswer, body: object) => fromPage(request(h.app).post(w(site, '/visitor')), t).send(body);
const panel = (conversationId: string, who = agent, siteId = site) =>
  withToken(h, who, 'get', `/sites/${siteId}/inbox/conversations/${conversationId}/visitor`);
const setTracking = (change: object) => withToken(h, owner, 'patch', `/sites/${site}/visitor-context`, change);
const page = (path: string, extra: object = {}) => ({ page: { url: `${ORIGIN}${path}`, ...extra } });
const sign = (claims: JWTPayload, key = secret, alg = 'HS256') => new SignJWT(claims).setProtectedHeader({ alg }).sign(new TextEncoder().encode(key));
const inAnHour = () => Math.floor(Date.now() / 1000) + 600;

describe('what the window reports', () => {
  test('is kept for the open conversation: the address without query and fragment, title, referrer, browser, language, time zone', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    const res = await report(t, {
      page: { url: `${ORIGIN}/cart?coupon=SECRET#pay`, title: 'Your cart\u202e', referrer: 'https://search.example/?q=private+words' },
      language: 'de-CH',
      timeZone: 'Europe/Zurich',
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ stored: true, pageTracking: true, keepQuery: false });
    const seen = await panel(conversation).expect(200);
    const v = seen.body.data;
    expect(v.pages).toEqual([
      { url: `${ORIGIN}/cart`, title: 'Your cart', referrer: 'https://search.example/', viewedAt: expect.any(String), durationSeconds: null },
    ]);
    expect(v.environment).toEqual({
      browser: 'Chrome',
      browserVersion: '131.0.0.0',
      os: 'Linux',
      osVersion: null,
      device: 'desktop',
      language: 'de-CH',
      timeZone: 'Europe/Zurich',
      reportedAt: expect.any(String),
    });
    expect(v).toMatchObject({ visitorId: t.visitorId, identityVerified: false, nameSource: 'generated', pageTracking: true, conversations: [] });
    // No address of the visitor's network, no location: nothing of the request but its user agent.
    const text = JSON.stringify(seen.body);
    expect(text).not.toMatch(/127\.0\.0\.1|::1|::ffff|latitude|city|country/i);
    expect(text).not.toContain('SECRET');
    expect(text).not.toContain('private');
  });

  test('a new page, a reload and a page of the visit: time on each, the reload not a page of its own', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    for (const p of ['/a', '/a', '/b', '/c']) expect((await report(t, page(p, { title: p }))).body.data.stored).toBe(true);
    const v = (await panel(conversation).expect(200)).body.data;
    expect(v.pages.map((p: { url: string }) => p.url)).toEqual([`${ORIGIN}/a`, `${ORIGIN}/b`, `${ORIGIN}/c`]);
    expect(v.pages.map((p: { durationSeconds: number | null }) => p.durationSeconds === null)).toEqual([false, false, true]);
    // Another browser reported later wins: the environment is the newest report's.
    await report(t, page('/c', { title: '/c' }), IPHONE);
    expect((await panel(conversation)).body.data.environment).toMatchObject({ browser: 'Safari', os: 'iOS', device: 'mobile' });
  });

  test('keeps at most 50 pages a conversation, the oldest going first', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    for (let i = 1; i <= 55; i++) await report(t, page(`/p${i}`)).expect(200);
    const v = (await panel(conversation).expect(200)).body.data;
    expect(v.pagesInConversation).toBe(50);
    expect(v.pages).toHaveLength(50);
    expect(v.pages[0].url).toBe(`${ORIGIN}/p6`);
    expect(v.pages[49].url).toBe(`${ORIGIN}/p55`);
    expect(Number((await h.runtime.db('conversation_pages').where({ conversation_id: conversation }).count({ n: '*' }))[0].n)).toBe(50);
  });

  test('keeps nothing before the first message or after a close', async () => {
    const t = await getToken(h.app, site);
    expect((await report(t, page('/before')).expect(200)).body.data.stored).toBe(false);
    const conversation = await say(t);
    await withToken(h, agent, 'post', `/sites/${site}/inbox/conversations/${conversation}/close`).expect(200);
    expect((await report(t, page('/after')).expect(200)).body.data.stored).toBe(false);
    expect((await panel(conversation)).body.data.pages).toEqual([]);
  });

  test('refuses a page of another origin, and a malformed report, with 400', async () => {
    const t = await getToken(h.app, site);
    await say(t);
    const other = await report(t, { page: { url: 'https://evil.example/phish' } });
    expect(other.status).toBe(400);
    expect(other.body.error.details[0].path).toBe('/body/page/url');
    expect((await report(t, { page: { url: 'javascript:alert(1)' } })).status).toBe(400);
    expect((await report(t, { page: {} })).status).toBe(400);
    expect((await report(t, { ...page('/x'), timeZone: 'Europe/Berlin; drop' })).status).toBe(400);
    expect((await report(t, { ...page('/x'), extra: 1 })).status).toBe(400);
  });

  test('needs a window token of the site', async () => {
    expect((await request(h.app).post(w(site, '/context')).set('Origin', ORIGIN).send(page('/x'))).status).toBe(401);
    const another = await h.newSite('Another');
    await allowOrigins(h, another.id);
    const t = await getToken(h.app, another.id);
    expect((await report(t, page('/x'))).status).toBe(401); // a token of this site, sent to the other
  });
});

describe('the tracking setting', () => {
  afterEach(async () => {
    await setTracking({ pageTracking: true, keepQuery: false }).expect(200);
  });

  test('is the owner’s: read and changed through the management API, audited', async () => {
    expect((await withToken(h, owner, 'get', `/sites/${site}/visitor-context`).expect(200)).body.data).toEqual({ pageTracking: true, keepQuery: false });
    expect((await withToken(h, agent, 'get', `/sites/${site}/visitor-context`)).status).toBe(403);
    expect((await withToken(h, agent, 'patch', `/sites/${site}/visitor-context`, { pageTracking: false })).status).toBe(403);
    expect((await setTracking({})).status).toBe(400);
    expect((await setTracking({ pageTracking: false }).expect(200)).body.data).toEqual({ pageTracking: false, keepQuery: false });
    const log = (await withToken(h, owner, 'get', `/sites/${site}/audit-log`).expect(200)).body.data;
    expect(log[0]).toMatchObject({ action: 'site.visitor_context_changed', objectId: site });
  });

  test('off: the window is told, and nothing of a report is kept', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    await setTracking({ pageTracking: false }).expect(200);
    expect((await fromPage(request(h.app).get(w(site, '/context')), t).expect(200)).body.data).toEqual({ pageTracking: false, keepQuery: false });
    const res = await report(t, { ...page('/secret-page'), language: 'en', timeZone: 'UTC' });
    expect(res.body.data).toEqual({ stored: false, pageTracking: false, keepQuery: false });
    for (const table of ['conversation_pages', 'conversation_environments']) {
      expect(await h.runtime.db(table).where({ conversation_id: conversation })).toEqual([]);
    }
    const v = (await panel(conversation).expect(200)).body.data;
    expect(v).toMatchObject({ pageTracking: false, pages: [], environment: null });
  });

  test('keepQuery keeps the query (never the fragment) of pages and referrers', async () => {
    await setTracking({ keepQuery: true }).expect(200);
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    expect((await report(t, { page: { url: `${ORIGIN}/search?q=shoes#top`, referrer: 'https://ads.example/?utm=x#y' } })).body.data.keepQuery).toBe(true);
    expect((await panel(conversation)).body.data.pages[0]).toMatchObject({ url: `${ORIGIN}/search?q=shoes`, referrer: 'https://ads.example/?utm=x' });
  });
});

describe('identity tokens at the gateway', () => {
  const gateway = (body: object, siteId = site) => request(h.app).post(w(siteId, '/token')).set('Origin', ORIGIN).send(body);

  test('a token signed with the identity secret makes a verified visitor with verified name, email and attributes', async () => {
    const identityToken = await sign({ sub: 'cust-1', exp: inAnHour(), name: 'Ada Lovelace', email: 'ada@example.com', attributes: { plan: 'pro', seats: 3 } });
    const res = await gateway({ identityToken }).expect(201);
    expect(res.body.data).toMatchObject({ visitorId: 'user:cust-1', verified: true, visitorCredential: null });
    const t = res.body.data as TokenAnswer;
    const conversation = await say(t);
    // What the page says without a signature never replaces what the server vouched for.
    await details(t, { name: 'Mallory', email: 'mallory@example.com', attributes: { plan: 'free', source: 'ad' } }).expect(200);
    const v = (await panel(conversation).expect(200)).body.data;
    expect(v).toMatchObject({
      visitorId: 'user:cust-1',
      identityVerified: true,
      displayName: 'Ada Lovelace',
      nameSource: 'verified',
      name: 'Ada Lovelace',
      nameVerified: true,
      email: 'ada@example.com',
      emailVerified: true,
    });
    expect(v.attributes.map((a: { name: string; value: unknown; verified: boolean }) => [a.name, a.value, a.verified])).toEqual([
      ['plan', 'pro', true],
      ['seats', 3, true],
      ['source', 'ad', false],
    ]);
  });

  test('the same user by userHash and by token is one visitor', async () => {
    const { identityHash } = await import('../../server/window/tokens');
    const byHash = await getToken(h.app, site, { userId: 'cust-2', userHash: identityHash(secret, 'cust-2') });
    const byToken = (await gateway({ identityToken: await sign({ sub: 'cust-2', exp: inAnHour() }) }).expect(201)).body.data;
    expect(byToken.visitorId).toBe(byHash.visitorId);
  });

  test('forged, expired, alg none, HS512, another site’s, and a rotated secret’s tokens are refused with 401', async () => {
    const claims = { sub: 'cust-3', exp: inAnHour() };
    const refused = async (identityToken: string, why: RegExp) => {
      const res = await gateway({ identityToken });
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(why);
    };
    await refused(await sign(claims, 'wis_not_the_secret_at_all_00000000000000000000'), /signature/);
    await refused(await sign({ ...claims, exp: Math.floor(Date.now() / 1000) - 600 }), /expired/);
    await refused(await sign({ ...claims, exp: Math.floor(Date.now() / 1000) + 7200 }), /more than an hour/);
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    await refused(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, /HS256, not none/);
    await refused(await sign(claims, secret, 'HS512'), /HS256, not HS512/);
    // Another site with verification on: its own secret signs for it, not for this site.
    const another = await h.newSite('Other shop');
    await allowOrigins(h, another.id);
    const otherSecret = (await h.runtime.services.access.setIdentity(another.id, { mode: 'optional' })).identitySecret!;
    await refused(await sign(claims, otherSecret), /signature/);
    expect((await gateway({ identityToken: await sign(claims, otherSecret) }, another.id)).status).toBe(201);
    await refused(await sign({ ...claims, aud: another.id }), /aud/);
    // Rotating the secret: a token signed with the old one stops at once.
    const before = await sign(claims, otherSecret);
    await h.runtime.services.access.setIdentity(another.id, { rotateSecret: true });
    const rotated = await gateway({ identityToken: before }, another.id);
    expect(rotated.status).toBe(401);
    expect(rotated.body.error.message).toMatch(/signature/);
  });

  test('with identity verification off, or beside userId, a token is a 400', async () => {
    const another = await h.newSite('No identities');
    await allowOrigins(h, another.id);
    const off = await gateway({ identityToken: await sign({ sub: 'x', exp: inAnHour() }) }, another.id);
    expect(off.status).toBe(400);
    expect(off.body.error.details[0].path).toBe('/body/identityToken');
    const both = await gateway({ identityToken: await sign({ sub: 'x', exp: inAnHour() }), userId: 'x', userHash: 'a'.repeat(64) });
    expect(both.status).toBe(400);
    expect((await gateway({ identityToken: 'not a jwt' })).status).toBe(400);
  });
});

describe('what a page says of its visitor', () => {
  test('is kept and shown as unverified: name, email, attributes', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t);
    await details(t, { name: 'Grace', email: 'grace@example.com', attributes: { cart: 3, vip: true } }).expect(200);
    const v = (await panel(conversation)).body.data;
    expect(v).toMatchObject({ displayName: 'Grace', nameSource: 'unverified', nameVerified: false, email: 'grace@example.com', emailVerified: false });
    expect(v.attributes).toEqual([
      { name: 'cart', value: 3, verified: false, updatedAt: expect.any(String) },
      { name: 'vip', value: true, verified: false, updatedAt: expect.any(String) },
    ]);
  });

  test('bad details are a 400 naming the field', async () => {
    const t = await getToken(h.app, site);
    expect((await details(t, { email: 'nope' })).status).toBe(400);
    expect((await details(t, { attributes: { a: { b: 1 } } })).status).toBe(400);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i]));
    expect((await details(t, { attributes: many })).status).toBe(400);
  });
});

describe('the side panel', () => {
  test('lists the visitor’s other conversations, newest first, and says when the visitor was first seen', async () => {
    const t = await getToken(h.app, site);
    const first = await say(t, 'first');
    await withToken(h, agent, 'post', `/sites/${site}/inbox/conversations/${first}/close`).expect(200);
    const second = await say(t, 'second');
    const v = (await panel(second).expect(200)).body.data;
    expect(v.conversations.map((c: { id: string }) => c.id)).toEqual([first]);
    expect(v.conversations[0].state).toBe('closed');
    expect(v.moreConversations).toBe(false);
    const firstCard = (await withToken(h, agent, 'get', `/sites/${site}/inbox/conversations/${first}`).expect(200)).body.data;
    expect(v.firstSeenAt).toBe(firstCard.createdAt);
  });

  test('is a member’s: another site’s conversation is 404, and a non-member’s site is 404', async () => {
    const another = await h.newSite('Elsewhere');
    const conv = (await h.visitorSay(another.id, 'v-elsewhere', 'hi')).conversation.id;
    expect((await panel(conv)).status).toBe(404);
    expect((await panel(conv, agent, another.id)).status).toBe(404);
    expect((await request(h.app).get(`${M}/sites/${site}/inbox/conversations/${conv}/visitor`)).status).toBe(401);
  });

  test('follows the visitor live: a kept report is a visitor.context event on the inbox stream', async () => {
    const server = await listenHttps(h.app);
    let s: SseStream | undefined;
    try {
      const t = await getToken(h.app, site);
      const conversation = await say(t);
      s = await openSse(server, `${M}/sites/${site}/inbox/events`, { Authorization: `Bearer ${agent.token}` });
      await s.waitFor((e) => e.event === 'ready');
      await report(t, page('/pricing')).expect(200);
      const e = await s.waitFor((x) => x.event === 'visitor.context');
      expect(e.data).toEqual({ conversationId: conversation, visitorId: t.visitorId, changedAt: expect.any(String) });
      // A reload of the same page in the same browser changes nothing: no event for it.
      const count = s.events.length;
      await report(t, page('/pricing')).expect(200);
      await report(t, page('/checkout')).expect(200);
      await s.waitFor((x) => x.event === 'visitor.context', undefined, count);
      expect(s.events.slice(count).filter((x) => x.event === 'visitor.context')).toHaveLength(1);
    } finally {
      s?.close();
      await server.close();
    }
  });
});
