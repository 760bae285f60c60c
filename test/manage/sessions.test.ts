/**
 * Signing in and out, sessions' lifetimes on a fake clock, the sign-in throttle, password change,
 * and the cross-site refusal, through the real app (response validation on).
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { cookieOf, M, manageHarness, newAccount, newMember, newToken, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { sha256Hex } from '../../server/platform/crypto';
import Redis from 'ioredis';
import { loggedApp } from '../helpers/test-app';
import { createApp } from '../../server/app';
import { createLogger } from '../../server/platform/logger';
import { createRedisLimiter } from '../../server/http/rate-limit/limiter';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
const MIN = 60_000;

beforeAll(async () => {
  h = await manageHarness({ now: () => clock });
});
afterAll(() => h.close());

const me = (cookie: string) => request(h.app).get(`${M}/me`).set('Cookie', cookie);

test('sign in sets a __Host- cookie (HttpOnly, Secure, SameSite=Lax, Path=/) and the session opens /me', async () => {
  const account = await newMember(h, h.site.id, 'Ana@Example.com', 'owner');
  const res = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'ana@example.COM', password: PASSWORD });
  expect(res.status).toBe(200);
  const set = (res.headers['set-cookie'] as unknown as string[])[0];
  expect(set).toMatch(/^__Host-session=[A-Za-z0-9]{43,}; /);
  const attributes = set.split('; ').slice(1);
  expect(attributes).toEqual(expect.arrayContaining(['Path=/', 'HttpOnly', 'Secure', 'SameSite=Lax', 'Max-Age=43200']));
  expect(set).not.toMatch(/Domain=/i);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
  expect(res.body.data.account).toMatchObject({ id: account.id, email: 'ana@example.com' });

  const cookie = cookieOf(res);
  const who = await me(cookie);
  expect(who.status).toBe(200);
  expect(who.body.data).toMatchObject({ via: 'session', account: { id: account.id }, sites: [{ id: h.site.id, role: 'owner' }] });

  // Only a hash of the token is stored.
  const token = cookie.split('=')[1];
  const rows = await h.runtime.db('sessions').where({ account_id: account.id });
  expect(JSON.stringify(rows)).not.toContain(token);
  expect(rows.map((r: { token_hash: string }) => r.token_hash)).toContain(sha256Hex(token));
});

test('every sign-in makes a new token; sign-out ends only that session and clears the cookie', async () => {
  await newAccount(h, 'bo@example.com');
  const a = await signIn(h, 'bo@example.com');
  const b = await signIn(h, 'bo@example.com');
  expect(a.cookie).not.toBe(b.cookie);
  const out = await request(h.app).delete(`${M}/session`).set(SAME_ORIGIN).set('Cookie', a.cookie);
  expect(out.status).toBe(204);
  expect((out.headers['set-cookie'] as unknown as string[])[0]).toMatch(/^__Host-session=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Lax/);
  expect((await me(a.cookie)).status).toBe(401);
  expect((await me(b.cookie)).status).toBe(200);
});

test('GET /session answers 200 whether signed in or not: the session and its account, or data null', async () => {
  const account = await newAccount(h, 'qi@example.com');
  const current = (cookie?: string, bearer?: string) => {
    let r = request(h.app).get(`${M}/session`);
    if (cookie) r = r.set('Cookie', cookie);
    if (bearer) r = r.set('Authorization', `Bearer ${bearer}`);
    return r;
  };
  const signedOut = await current();
  expect(signedOut.status).toBe(200);
  expect(signedOut.body).toEqual({ data: null });
  expect(signedOut.headers['cache-control']).toBe('no-store');
  expect(signedOut.headers['set-cookie']).toBeUndefined();

  const signed = await signIn(h, 'qi@example.com');
  const open = await current(signed.cookie);
  expect(open.status).toBe(200);
  expect(open.body.data.account).toMatchObject({ id: account.id, email: 'qi@example.com' });
  expect(open.body.data.session).toMatchObject({ id: signed.res.body.data.session.id, current: true });
  expect(JSON.stringify(open.body)).not.toContain(signed.cookie.split('=')[1]);

  // A management token has no session; a wrong one is refused as everywhere.
  const token = await newToken(h, signed.cookie);
  expect((await current(undefined, token.token)).body).toEqual({ data: null });
  const wrongToken = await current(undefined, 'wcm_notarealtoken0000000000000000000000000000');
  expect(wrongToken.status).toBe(401);

  // Signed out, the cookie opens nothing: null.
  await request(h.app).delete(`${M}/session`).set(SAME_ORIGIN).set('Cookie', signed.cookie).expect(204);
  const ended = await current(signed.cookie);
  expect(ended.status).toBe(200);
  expect(ended.body).toEqual({ data: null });
  expect(ended.headers['set-cookie']).toBeUndefined();
});

test('a wrong password and an unknown email get the same answer', async () => {
  await newAccount(h, 'cy@example.com');
  const wrong = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'cy@example.com', password: 'not the password' });
  const unknown = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'nobody@example.com', password: 'not the password' });
  expect(wrong.status).toBe(401);
  expect(unknown.status).toBe(401);
  expect(wrong.body).toEqual(unknown.body);
  expect(wrong.headers['www-authenticate']).toBe(unknown.headers['www-authenticate']);
  expect(wrong.headers['set-cookie']).toBeUndefined();
  expect(unknown.headers['set-cookie']).toBeUndefined();
});

test('an unknown email costs a password hash like a wrong password', async () => {
  const hasher = h.runtime.services.accounts.signIn.hasher;
  const verify = jest.spyOn(hasher, 'verify');
  const nothing = jest.spyOn(hasher, 'verifyNothing');
  try {
    await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'ghost@example.com', password: 'whatever it is' });
    expect(nothing).toHaveBeenCalledTimes(1);
    expect(verify).toHaveBeenCalledTimes(0);
  } finally {
    verify.mockRestore();
    nothing.mockRestore();
  }
});

test('an idle session ends after 30 minutes; a used one lives on until 12 hours after sign-in', async () => {
  await newAccount(h, 'di@example.com');
  const idle = await signIn(h, 'di@example.com');
  const busy = await signIn(h, 'di@example.com');
  clock += 29 * MIN;
  expect((await me(idle.cookie)).status).toBe(200); // used: its idle limit moves
  expect((await me(busy.cookie)).status).toBe(200);
  clock += 29 * MIN;
  expect((await me(idle.cookie)).status).toBe(200);
  expect((await me(busy.cookie)).status).toBe(200);
  clock += 20 * MIN;
  expect((await me(busy.cookie)).status).toBe(200);
  clock += 11 * MIN;
  const ended = await me(idle.cookie);
  expect(ended.status).toBe(401);
  expect(ended.body.error.message).toMatch(/expired/);
  // The cookie is not cleared by a 401: the answer may arrive after a sign-in that set a new one
  // (the request left before it), and clearing would sign that browser out again.
  expect(ended.headers['set-cookie']).toBeUndefined();
  expect((await me(busy.cookie)).status).toBe(200);

  // The other session, used every 25 minutes, still ends at 12 hours.
  const start = clock - 89 * MIN;
  while (clock < start + 12 * 60 * MIN - 25 * MIN) {
    clock += 25 * MIN;
    expect((await me(busy.cookie)).status).toBe(200);
  }
  clock = start + 12 * 60 * MIN;
  expect((await me(busy.cookie)).status).toBe(401);
});

test('sign-in is throttled per email (429 with Retry-After), whether the account exists or not', async () => {
  await newAccount(h, 'ed@example.com');
  for (const email of ['ed@example.com', 'nobody-else@example.com']) {
    for (let i = 0; i < 10; i++) {
      const r = await request(h.app)
        .post(`${M}/session`)
        .set(SAME_ORIGIN)
        .send({ email, password: `guess number ${i}` });
      expect(r.status).toBe(401);
    }
    const limited = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email, password: PASSWORD });
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limit_exceeded');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  }
  // After the window the right password works again.
  clock += 31 * MIN;
  expect((await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'ed@example.com', password: PASSWORD })).status).toBe(200);
});

test('sign-in is throttled per client address across emails', async () => {
  const limited = await manageHarness({ now: () => clock });
  try {
    let last: request.Response | undefined;
    for (let i = 0; i < 101; i++) {
      last = await request(limited.app)
        .post(`${M}/session`)
        .set(SAME_ORIGIN)
        .send({ email: `user${i}@example.com`, password: 'guess guess guess' });
      if (i < 100) expect(last.status).toBe(401);
    }
    expect(last!.status).toBe(429);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  } finally {
    await limited.close();
  }
}, 60_000);

test("with Redis, two instances count one email's sign-in attempts together", async () => {
  const prefix = `test:signin:${Date.now()}:${Math.random()}:`;
  const connections = [new Redis('redis://127.0.0.1:6379'), new Redis('redis://127.0.0.1:6379')];
  try {
    const [a, b] = connections.map((redis) =>
      createApp({
        services: h.runtime.services,
        logger: createLogger('silent'),
        limiter: createRedisLimiter(redis, 300, prefix),
        validateResponses: true,
        ready: async () => true,
      }),
    );
    for (let i = 0; i < 10; i++) {
      const res = await request(i % 2 ? a : b)
        .post(`${M}/session`)
        .set(SAME_ORIGIN)
        .send({ email: 'shared@example.com', password: `guess number ${i}` });
      expect(res.status).toBe(401);
    }
    for (const app of [a, b]) {
      const res = await request(app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'shared@example.com', password: 'one more guess' });
      expect(res.status).toBe(429);
    }
  } finally {
    for (const redis of connections) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
    }
  }
});

test('a password change ends every other session of the account and keeps the current one', async () => {
  await newAccount(h, 'fa@example.com');
  const current = await signIn(h, 'fa@example.com');
  const other = await signIn(h, 'fa@example.com');
  const wrong = await request(h.app)
    .post(`${M}/password`)
    .set(SAME_ORIGIN)
    .set('Cookie', current.cookie)
    .send({ currentPassword: 'not it at all', newPassword: 'a brand new password' });
  expect(wrong.status).toBe(403);
  expect(wrong.body.error.code).toBe('forbidden');
  expect((await me(other.cookie)).status).toBe(200);

  const changed = await request(h.app)
    .post(`${M}/password`)
    .set(SAME_ORIGIN)
    .set('Cookie', current.cookie)
    .send({ currentPassword: PASSWORD, newPassword: 'a brand new password' });
  expect(changed.status).toBe(204);
  expect((await me(current.cookie)).status).toBe(200);
  expect((await me(other.cookie)).status).toBe(401);
  await expect(signIn(h, 'fa@example.com')).rejects.toThrow(/401/);
  await signIn(h, 'fa@example.com', 'a brand new password');

  const short = await request(h.app)
    .post(`${M}/password`)
    .set(SAME_ORIGIN)
    .set('Cookie', current.cookie)
    .send({ currentPassword: 'a brand new password', newPassword: 'short' });
  expect(short.status).toBe(400);
  expect(short.body.error.details[0].path).toBe('/body/newPassword');
});

test("a member lists their sessions and ends one; another account's session is 404", async () => {
  await newAccount(h, 'gu@example.com');
  await newAccount(h, 'ha@example.com');
  const one = await signIn(h, 'gu@example.com');
  const two = await signIn(h, 'gu@example.com');
  const stranger = await signIn(h, 'ha@example.com');
  const list = await request(h.app).get(`${M}/sessions`).set('Cookie', one.cookie);
  expect(list.status).toBe(200);
  expect(list.body.data).toHaveLength(2);
  const mine = list.body.data.find((s: { current: boolean }) => s.current);
  const theirs = list.body.data.find((s: { current: boolean }) => !s.current);
  expect(mine.id).toBe(one.res.body.data.session.id);
  expect(JSON.stringify(list.body)).not.toContain(one.cookie.split('=')[1]);

  const foreign = await request(h.app).delete(`${M}/sessions/${theirs.id}`).set(SAME_ORIGIN).set('Cookie', stranger.cookie);
  expect(foreign.status).toBe(404);
  expect((await me(two.cookie)).status).toBe(200);
  const ended = await request(h.app).delete(`${M}/sessions/${theirs.id}`).set(SAME_ORIGIN).set('Cookie', one.cookie);
  expect(ended.status).toBe(204);
  expect((await me(two.cookie)).status).toBe(401);
});

test('logs never carry passwords, session tokens or management tokens, even when a request fails', async () => {
  const { app, lines } = loggedApp(h.runtime.services, h.limiter);
  await newAccount(h, 'lo@example.com');
  const signed = await request(app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'lo@example.com', password: PASSWORD });
  const cookie = cookieOf(signed);
  await request(app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'lo@example.com', password: 'a wrong password guess' });
  const token = (await request(app).post(`${M}/tokens`).set(SAME_ORIGIN).set('Cookie', cookie).send({ label: 'x' })).body.data.token;
  const failing = jest.spyOn(h.runtime.services.accounts.signIn, 'me').mockRejectedValueOnce(new Error('kaboom'));
  expect((await request(app).get(`${M}/me`).set('Authorization', `Bearer ${token}`)).status).toBe(500);
  failing.mockRestore();
  await request(app).post(`${M}/password`).set(SAME_ORIGIN).set('Cookie', cookie).send({ currentPassword: PASSWORD, newPassword: 'the next long password' });
  await new Promise((r) => setTimeout(r, 50));
  const all = lines().join('\n');
  expect(all).toContain('kaboom'); // the log was written, and the failure is in it
  for (const secret of [PASSWORD, 'a wrong password guess', 'the next long password', cookie.split('=')[1], token]) expect(all).not.toContain(secret);
});

describe('cross-site requests', () => {
  let cookie: string;
  beforeAll(async () => {
    await newAccount(h, 'ir@example.com');
    cookie = (await signIn(h, 'ir@example.com')).cookie;
  });
  const change = () => request(h.app).post(`${M}/tokens`).set('Cookie', cookie);

  test.each([
    ['cross-site', { 'Sec-Fetch-Site': 'cross-site' }],
    ['same-site (a sibling origin)', { 'Sec-Fetch-Site': 'same-site' }],
    ['no Fetch Metadata and no Origin', {}],
    ['no Fetch Metadata and another Origin', { Origin: 'https://evil.example' }],
    ['Fetch Metadata beats a matching Origin', { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://localhost:8443' }],
  ])('a change with a session cookie is refused: %s', async (_name, headers) => {
    const res = await change().set(headers).send({ label: 'x' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('cross_site_request');
  });

  test('a sign-in from another site is refused too (login CSRF)', async () => {
    const res = await request(h.app).post(`${M}/session`).set('Sec-Fetch-Site', 'cross-site').send({ email: 'ir@example.com', password: PASSWORD });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('cross_site_request');
  });

  test("same-origin passes, and so does the service's own Origin without Fetch Metadata", async () => {
    expect((await change().set(SAME_ORIGIN).send({ label: 'a' })).status).toBe(201);
    expect((await change().set('Origin', 'https://localhost:8443').send({ label: 'b' })).status).toBe(201);
  });

  test('reads need no header; a bearer token needs none for changes', async () => {
    expect((await me(cookie)).status).toBe(200);
    const token = await newToken(h, cookie);
    const res = await request(h.app)
      .post(`${M}/tokens`)
      .set('Authorization', `Bearer ${token.token}`)
      .set('Sec-Fetch-Site', 'cross-site')
      .send({ label: 'from a script' });
    expect(res.status).toBe(201);
  });
});
