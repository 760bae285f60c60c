import request from 'supertest';
import { createHarness, Harness, HarnessOptions } from '../helpers/harness';
import { createPasswordHasher } from '../../server/accounts/passwords';

/**
 * scrypt at a cost tests can afford (OWASP's N=2^17 takes about a second here); the rules are the
 * same, and passwords.unit.test.ts checks the production parameters themselves.
 */
export const TEST_HASHER = createPasswordHasher({ N: 2 ** 10, r: 8, p: 1 });

export const PASSWORD = 'correct horse battery staple';
export const SAME_ORIGIN = { 'Sec-Fetch-Site': 'same-origin' };
export const M = '/manage/v1';

export const manageHarness = (opts: HarnessOptions = {}) => createHarness({ passwordHasher: TEST_HASHER, ...opts });

export async function newAccount(h: Harness, email: string, password = PASSWORD) {
  return h.runtime.services.accounts.registry.create(email, password);
}

/** An account that is `role` of `siteId` (made through the CLI's service call). */
export async function newMember(h: Harness, siteId: string, email: string, role: 'owner' | 'agent') {
  const account = await newAccount(h, email);
  await h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, siteId, email, role);
  return account;
}

/** The `name=value` of a Set-Cookie answer, as a browser would send it back. */
export function cookieOf(res: request.Response): string {
  const set = res.headers['set-cookie'] as unknown as string[] | undefined;
  if (!set?.length) throw new Error(`no Set-Cookie (status ${res.status}: ${JSON.stringify(res.body)})`);
  return set[0].split(';')[0];
}

export async function signIn(h: Harness, email: string, password = PASSWORD) {
  const res = await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email, password });
  if (res.status !== 200) throw new Error(`sign-in answered ${res.status}: ${JSON.stringify(res.body)}`);
  return { res, cookie: cookieOf(res) };
}

/** A management token of the account (through its session). */
export async function newToken(h: Harness, cookie: string, label = 'ci') {
  const res = await request(h.app).post(`${M}/tokens`).set(SAME_ORIGIN).set('Cookie', cookie).send({ label });
  if (res.status !== 201) throw new Error(`token answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data as { id: string; token: string };
}

/** A member of `siteId` with a management token, as a script acts for it. */
export async function memberWithToken(h: Harness, siteId: string, email: string, role: 'owner' | 'agent') {
  const account = await newMember(h, siteId, email, role);
  return { id: account.id, token: (await newToken(h, (await signIn(h, email)).cookie)).token };
}

/** A /manage/v1 request with a management token (no cross-site headers needed). */
export function withToken(h: Harness, who: { token: string }, method: 'get' | 'post' | 'put' | 'patch' | 'delete', path: string, body?: object) {
  const r = request(h.app)[method](`${M}${path}`).set('Authorization', `Bearer ${who.token}`);
  return body ? r.send(body) : r;
}
