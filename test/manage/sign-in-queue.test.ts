/**
 * Every path that hashes a password goes through the hash pool's bounded queue, through the real
 * app (response validation on): sign-in for a known and for an unknown email queue the same work;
 * a full queue answers 503 `service_unavailable` with Retry-After at once (before any queued hash
 * is answered) on sign-in, password change, invitation acceptance, setup and the CLI's account
 * creation; and the held requests answer as soon as their hashes do.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { cookieOf, M, manageHarness, newMember, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { createHashPool, HashPool } from '../../server/accounts/hash-pool';
import { createPasswordHasher } from '../../server/accounts/passwords';
import { fakeHashThreads } from '../fakes/fake-hash-threads';

const THREADS = 1;
const QUEUE = 2;

let h: Harness;
let pool: HashPool;
/** While false, hashes stay under way until the test answers them. */
let answering = true;
const threads = fakeHashThreads(() => answering);

beforeAll(async () => {
  pool = createHashPool({ threads: THREADS, queue: QUEUE, spawn: threads.spawn });
  h = await manageHarness({ passwordHasher: createPasswordHasher({ N: 2 ** 10, r: 8, p: 1 }, pool) });
});
afterAll(async () => {
  await h.close();
  await pool.close();
});

const post = (path: string, body: object, cookie?: string) => {
  const r = request(h.app).post(`${M}${path}`).set(SAME_ORIGIN);
  return (cookie ? r.set('Cookie', cookie) : r).send(body);
};
const signInAs = (email: string, password: string) => post('/session', { email, password });

/** Starts `count` sign-ins with unknown emails and waits until they hold every thread and queue place. */
async function fillThePool(count = THREADS + QUEUE) {
  answering = false;
  const held = Array.from({ length: count }, (_, i) => signInAs(`filler-${i}-${Date.now()}@example.com`, 'not the password').then((r) => r));
  await waitFor('the pool to fill', () => pool.stats().running === THREADS && pool.stats().queued === QUEUE);
  return held;
}

/** Answers every held hash until none is under way, and the held requests with them. */
async function drain<T>(held: Promise<T>[]) {
  answering = true;
  while (threads.busy().length) {
    for (const t of threads.busy()) t.answer();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return Promise.all(held);
}

function expectRefused(res: request.Response) {
  expect(res.status).toBe(503);
  expect(res.body.error.code).toBe('service_unavailable');
  expect(res.body.error.message).toMatch(/retry in \d+ s/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(res.headers['set-cookie']).toBeUndefined();
}

test('the first owner by the setup link: a full queue refuses it at once, and the link still works after', async () => {
  const link = (await h.runtime.services.accounts.setup.issueLink())!;
  const token = new URL(link.url).hash.replace('#token=', '');
  const held = await fillThePool();
  const refused = await post('/setup', { token, email: 'first@example.com', password: PASSWORD });
  expectRefused(refused);
  // The CLI's `account create` calls the same service.
  await expect(h.runtime.services.accounts.registry.create('cli-made@example.com', PASSWORD)).rejects.toMatchObject({
    status: 503,
    code: 'service_unavailable',
  });
  expect(pool.stats().running + pool.stats().queued).toBe(THREADS + QUEUE); // nothing held was answered meanwhile
  expect((await drain(held)).map((r) => r.status)).toEqual([401, 401, 401]);
  const made = await post('/setup', { token, email: 'first@example.com', password: PASSWORD });
  expect(made.status).toBe(201);
});

test('a known and an unknown email queue the same work, and get the same answer', async () => {
  await newMember(h, h.site.id, 'known@example.com', 'agent');
  answering = false;
  const before = threads.jobs().length;
  const known = signInAs('known@example.com', 'not the password').then((r) => r);
  const unknown = signInAs('nobody-here@example.com', 'not the password').then((r) => r);
  await waitFor('both hashes to be in the pool', () => pool.stats().running + pool.stats().queued === 2);
  const [a, b] = await drain([known, unknown]);
  expect(a.status).toBe(401);
  expect(b.status).toBe(401);
  expect(a.body).toEqual(b.body);
  const jobs = threads.jobs().slice(before);
  expect(jobs).toHaveLength(2);
  const shape = ({ N, r, p, keyLength, maxmem, salt }: (typeof jobs)[number]) => ({ N, r, p, keyLength, maxmem, saltBytes: salt.length });
  expect(shape(jobs[0])).toEqual(shape(jobs[1]));
});

test('a full queue answers 503 with Retry-After at once on every path that hashes, known emails and unknown alike', async () => {
  await newMember(h, h.site.id, 'owner@example.com', 'owner');
  const ownerCookie = (await signIn(h, 'owner@example.com')).cookie;
  const invitation = (await post(`/sites/${h.site.id}/invitations`, { email: 'invited@example.com', role: 'agent' }, ownerCookie)).body.data;
  const toKnown = (await post(`/sites/${h.site.id}/invitations`, { email: 'known@example.com', role: 'owner' }, ownerCookie)).body.data;

  const held = await fillThePool();
  const refusals = [
    await signInAs('owner@example.com', PASSWORD), // the right password of a real account
    await signInAs('nobody-at-all@example.com', PASSWORD),
    await post('/password', { currentPassword: PASSWORD, newPassword: 'another long password' }, ownerCookie),
    await post('/invitations/accept', { token: invitation.token, email: 'invited@example.com', password: PASSWORD }),
    await post('/invitations/accept', { token: toKnown.token, email: 'known@example.com', password: PASSWORD }),
  ];
  for (const res of refusals) expectRefused(res);
  expect(refusals[0].body).toEqual(refusals[1].body); // a refusal does not tell which emails have accounts
  // Every refusal came while the held hashes were still under way: refused at once, not queued.
  expect(pool.stats()).toMatchObject({ running: THREADS, queued: QUEUE, maxQueued: QUEUE });
  expect(threads.jobs().filter((j) => j.password === 'another long password')).toHaveLength(0);

  expect((await drain(held)).map((r) => r.status)).toEqual([401, 401, 401]);
  // Nothing was taken by the refusals: the invitation and the password still work.
  const accepted = await post('/invitations/accept', { token: invitation.token, email: 'invited@example.com', password: PASSWORD });
  expect(accepted.status).toBe(200);
  expect(cookieOf(await signInAs('owner@example.com', PASSWORD))).toMatch(/^__Host-session=/);
  expect(pool.stats().maxQueued).toBe(QUEUE);
});

test('a hashing thread that dies fails that request with a 500 in the envelope; the next sign-in works', async () => {
  answering = false;
  const pending = signInAs('owner@example.com', PASSWORD).then((r) => r);
  await waitFor('the hash to be under way', () => threads.busy().length === 1);
  threads.busy()[0].crash('killed');
  const res = await pending;
  expect(res.status).toBe(500);
  expect(res.body.error.code).toBe('internal_error');
  expect(JSON.stringify(res.body)).not.toMatch(/thread|killed/); // nothing internal shown
  answering = true;
  expect((await signInAs('owner@example.com', PASSWORD)).status).toBe(200);
});
