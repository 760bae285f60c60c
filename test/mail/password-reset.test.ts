/**
 * Forgot password over /manage/v1 with a real SMTP sink: one answer whether or not the email has
 * an account, a single-use link of one hour (only its hash stored), the new password ending every
 * session and written to the security log, and the request budget.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { sha256Hex } from '../../server/platform/crypto';
import { waitFor } from '../helpers/wait';
import { M, newAccount, PASSWORD, SAME_ORIGIN, signIn } from '../manage/helpers';
import type { Sink } from './sink';
import { mailHarness, MailHarness } from './harness';

const NEW_PASSWORD = 'a brand new passphrase';
let h: Harness;
let sink: Sink;
let mail: MailHarness;
let offset = 0;

beforeAll(async () => {
  mail = await mailHarness({ now: () => Date.now() + offset });
  ({ h, sink } = mail);
});

afterAll(async () => {
  await mail?.close();
});

const ask = (email: string) => request(h.app).post(`${M}/password-resets`).set(SAME_ORIGIN).send({ email });
const complete = (token: string, newPassword = NEW_PASSWORD) =>
  request(h.app).post(`${M}/password-resets/complete`).set(SAME_ORIGIN).send({ token, newPassword });

/** The token of the newest reset email to `email`, once it arrived (`count` emails to it in all). */
async function linkTo(email: string, count = 1): Promise<string> {
  await waitFor(`reset email ${count} to ${email}`, () => sink.captured.filter((c) => c.to.includes(email)).length === count);
  const mail = sink.captured.filter((c) => c.to.includes(email))[count - 1].mail;
  expect(mail.subject).toBe('Set a new password');
  const inText = /\/dashboard\/reset-password#token=([0-9A-Za-z]{20,100})/.exec(mail.text ?? '')?.[1];
  const inHtml = /\/dashboard\/reset-password#token=([0-9A-Za-z]{20,100})"/.exec(String(mail.html))?.[1];
  expect(inText).toBeDefined();
  expect(inHtml).toBe(inText);
  return inText!;
}

test('one answer for a known and an unknown email; the link sets the password once and ends every session', async () => {
  const account = await newAccount(h, 'reset-me@example.test');
  const first = await signIn(h, 'reset-me@example.test');
  const second = await signIn(h, 'reset-me@example.test');

  const known = await ask('Reset-Me@example.test');
  const unknown = await ask('nobody-here@example.test');
  expect(known.status).toBe(202);
  expect(unknown.status).toBe(202);
  expect(unknown.body).toEqual(known.body);
  const token = await linkTo('reset-me@example.test');
  // Nothing is queued for an email without an account.
  expect(await h.runtime.db('emails').where({ recipient: 'nobody-here@example.test' }).count({ n: '*' })).toEqual([{ n: 0 }]);
  // Only the hash of the link is stored.
  const rows = await h.runtime.db('password_resets').where({ account_id: account.id });
  expect(rows).toHaveLength(1);
  expect(rows[0].token_hash).toBe(sha256Hex(token));
  expect(JSON.stringify(rows)).not.toContain(token);

  // The password rules apply; a weak one leaves the link usable.
  expect((await complete(token, 'short')).status).toBe(400);
  const done = await complete(token);
  expect(done.status).toBe(200);
  expect(done.body.data).toEqual({ email: 'reset-me@example.test' });
  // Once only.
  expect((await complete(token, 'yet another passphrase')).status).toBe(404);

  // Every session ended; the old password is gone, the new one signs in.
  for (const s of [first, second]) expect((await request(h.app).get(`${M}/me`).set('Cookie', s.cookie)).status).toBe(401);
  expect((await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'reset-me@example.test', password: PASSWORD })).status).toBe(401);
  const fresh = await signIn(h, 'reset-me@example.test', NEW_PASSWORD);
  const log = await request(h.app).get(`${M}/security-log`).set('Cookie', fresh.cookie);
  const actions = log.body.data.map((e: { action: string }) => e.action);
  expect(actions).toContain('account.password_reset');
  expect(actions).toContain('sessions.ended.password_reset');
});

test('a link expires after one hour; using one ends the others; an unknown token is 404', async () => {
  await newAccount(h, 'late@example.test');
  expect((await ask('late@example.test')).status).toBe(202);
  const old = await linkTo('late@example.test', 1);
  offset = 3600_000 + 1000;
  try {
    expect((await complete(old)).status).toBe(404);
  } finally {
    offset = 0;
  }
  expect((await ask('late@example.test')).status).toBe(202);
  const a = await linkTo('late@example.test', 2);
  expect((await ask('late@example.test')).status).toBe(202);
  const b = await linkTo('late@example.test', 3);
  expect((await complete(b)).status).toBe(200);
  expect((await complete(a, 'another good passphrase')).status).toBe(404);
  expect((await complete('doesnotexistdoesnotexist')).status).toBe(404);
});

test('asking is limited per email like sign-in, without touching the sign-in budget; a cross-site request is refused', async () => {
  await newAccount(h, 'flood@example.test');
  for (let i = 0; i < 10; i++) expect((await ask('flood@example.test')).status).toBe(202);
  const limited = await ask('flood@example.test');
  expect(limited.status).toBe(429);
  expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  await signIn(h, 'flood@example.test');
  expect((await request(h.app).post(`${M}/password-resets`).send({ email: 'flood@example.test' })).status).toBe(403);
});
