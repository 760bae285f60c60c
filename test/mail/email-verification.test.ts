/**
 * Verified email and changing it over /manage/v1 with a real SMTP sink: an account made by an
 * invitation is emailed a link of its own (24 hours, single use, only its hash stored) and cannot be
 * found by its email until it is used; a change of email sends a link to the new address and a
 * notice without a link to the old one, and happens only when the link is used, if the address is
 * still free then.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { sha256Hex } from '../../server/platform/crypto';
import type { SignedActor } from '../../server/accounts/common';
import { waitFor } from '../helpers/wait';
import { M, newAccount, newMember, PASSWORD, SAME_ORIGIN, signIn } from '../manage/helpers';
import type { Sink, Captured } from './sink';
import { mailHarness, MailHarness } from './harness';

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

const use = (token: string) => request(h.app).post(`${M}/email-links/complete`).set(SAME_ORIGIN).send({ token });
const me = async (cookie: string) => (await request(h.app).get(`${M}/me`).set('Cookie', cookie)).body.data.account;
const actionsOf = async (cookie: string) =>
  (await request(h.app).get(`${M}/security-log`).set('Cookie', cookie)).body.data.map((e: { action: string }) => e.action) as string[];

/** The `count`-th email to `email` with this subject, once it arrived. */
async function mailTo(email: string, subject: string, count = 1): Promise<Captured['mail']> {
  const of = () => sink.captured.filter((c) => c.to.includes(email) && c.mail.subject === subject);
  await waitFor(`"${subject}" ${count} to ${email}`, () => of().length >= count);
  return of()[count - 1].mail;
}

/** The token of a link email: the same in both parts. */
function tokenIn(mail: Captured['mail']): string {
  const inText = /\/dashboard\/verify-email#token=([0-9A-Za-z]{20,100})/.exec(mail.text ?? '')?.[1];
  const inHtml = /\/dashboard\/verify-email#token=([0-9A-Za-z]{20,100})"/.exec(String(mail.html))?.[1];
  expect(inText).toBeDefined();
  expect(inHtml).toBe(inText);
  return inText!;
}

/** An account made by accepting an invitation to a site of `ownerEmail`: unverified. */
async function invitedAccount(email: string, ownerEmail: string) {
  const site = await h.newSite(`Site of ${ownerEmail}`);
  const owner = await newMember(h, site.id, ownerEmail, 'owner');
  const actor: SignedActor = { manager: { accountId: owner.id, email: owner.email, via: 'session' }, clientIp: null };
  const inv = await h.runtime.services.accounts.invitations.create(actor, site.id, email, 'agent');
  await h.runtime.services.accounts.invitations.accept(inv.token, { email, password: PASSWORD }, {});
  return signIn(h, email);
}

test('an invited account gets its own link: once, within 24 hours; until then it is not found by its email', async () => {
  const { cookie } = await invitedAccount('invited@example.test', 'owner-1@example.test');
  expect(await me(cookie)).toMatchObject({ email: 'invited@example.test', emailVerified: false });
  const token = tokenIn(await mailTo('invited@example.test', 'Confirm your email address'));
  const rows = await h.runtime.db('email_links').where({ email: 'invited@example.test' });
  expect(rows).toHaveLength(1);
  expect(rows[0].token_hash).toBe(sha256Hex(token));
  expect(JSON.stringify(rows)).not.toContain(token);

  const other = await h.newSite('Elsewhere');
  const add = () => h.runtime.services.accounts.members.add({ manager: null, clientIp: null }, other.id, 'invited@example.test', 'agent');
  await expect(add()).rejects.toMatchObject({ code: 'not_found' });

  expect((await use('doesnotexistdoesnotexist')).status).toBe(404);
  const done = await use(token);
  expect(done.status).toBe(200);
  expect(done.body.data).toEqual({ email: 'invited@example.test', changed: false });
  expect((await use(token)).status).toBe(404);
  expect(await me(cookie)).toMatchObject({ emailVerified: true });
  expect(await actionsOf(cookie)).toContain('account.email_verified');
  await expect(add()).resolves.toMatchObject({ emailVerified: true });

  // Another invited account's link, used a second after its 24 hours: dead.
  const late = await invitedAccount('late@example.test', 'owner-2@example.test');
  const lateToken = tokenIn(await mailTo('late@example.test', 'Confirm your email address'));
  offset = 24 * 3600_000 + 1000;
  try {
    expect((await use(lateToken)).status).toBe(404);
  } finally {
    offset = 0;
  }
  expect(await me(late.cookie)).toMatchObject({ emailVerified: false });
}, 60_000);

test('resend: a link to the unverified account, not twice within a minute; a verified one gets none', async () => {
  const { cookie } = await invitedAccount('resend@example.test', 'owner-3@example.test');
  await mailTo('resend@example.test', 'Confirm your email address');
  const resend = () => request(h.app).post(`${M}/email-verifications`).set(SAME_ORIGIN).set('Cookie', cookie);
  // Within the minute: the link on its way is the answer.
  expect((await resend()).body.data).toEqual({ emailVerified: false });
  expect((await h.runtime.db('emails').where({ recipient: 'resend@example.test', template: 'email_verification' })).length).toBe(1);
  // A minute later (the stored link made older): one more, and once only.
  await h.runtime
    .db('email_links')
    .where({ email: 'resend@example.test' })
    .update({ created_at: Date.now() - 61_000 });
  expect((await resend()).body.data).toEqual({ emailVerified: false });
  expect((await resend()).body.data).toEqual({ emailVerified: false });
  const token = tokenIn(await mailTo('resend@example.test', 'Confirm your email address', 2));
  expect((await use(token)).status).toBe(200);
  const again = await resend();
  expect(again.status).toBe(202);
  expect(again.body.data).toEqual({ emailVerified: true });
  expect((await h.runtime.db('emails').where({ recipient: 'resend@example.test', template: 'email_verification' })).length).toBe(2);
  expect((await request(h.app).post(`${M}/email-verifications`).set(SAME_ORIGIN)).status).toBe(401);
}, 60_000);

test('change email: the new address gets the link, the old one a notice; the change happens only when the link is used', async () => {
  await newAccount(h, 'old@example.test');
  const first = await signIn(h, 'old@example.test');
  const second = await signIn(h, 'old@example.test');
  const change = (body: object) => request(h.app).post(`${M}/email-changes`).set(SAME_ORIGIN).set('Cookie', first.cookie).send(body);

  expect((await change({ newEmail: 'new@example.org', password: 'not the password at all' })).status).toBe(403);
  expect((await change({ newEmail: 'OLD@example.test', password: PASSWORD })).status).toBe(400);
  expect((await change({ newEmail: 'not an email', password: PASSWORD })).status).toBe(400);
  const asked = await change({ newEmail: 'New@Example.org', password: PASSWORD });
  expect(asked.status).toBe(202);

  const token = tokenIn(await mailTo('new@example.org', 'Confirm your new email address'));
  const notice = await mailTo('old@example.test', 'Your email is being changed');
  expect(notice.text).toContain('n***@e***.org');
  for (const part of [notice.text ?? '', String(notice.html)]) {
    expect(part).not.toContain('new@example.org');
    expect(part).not.toMatch(/token=|https?:\/\//);
  }
  // Nothing changed yet: the old address still signs in.
  expect(await me(first.cookie)).toMatchObject({ email: 'old@example.test' });
  await signIn(h, 'old@example.test');

  const done = await use(token);
  expect(done.status).toBe(200);
  expect(done.body.data).toEqual({ email: 'new@example.org', changed: true });
  expect((await use(token)).status).toBe(404);
  // The sessions are kept; the account has its new, verified email.
  for (const s of [first, second]) expect(await me(s.cookie)).toMatchObject({ email: 'new@example.org', emailVerified: true });
  await signIn(h, 'new@example.org');
  expect((await request(h.app).post(`${M}/session`).set(SAME_ORIGIN).send({ email: 'old@example.test', password: PASSWORD })).status).toBe(401);
  const actions = await actionsOf(first.cookie);
  expect(actions).toContain('account.email_change_requested');
  expect(actions).toContain('account.email_changed');
}, 60_000);

test('an address taken meanwhile: a clear 409, the email stays, and an open password reset to the old address ends on a change', async () => {
  await newAccount(h, 'mover@example.test');
  const { cookie } = await signIn(h, 'mover@example.test');
  const change = (newEmail: string) => request(h.app).post(`${M}/email-changes`).set(SAME_ORIGIN).set('Cookie', cookie).send({ newEmail, password: PASSWORD });
  // The answer is the same whether the address has an account or not.
  const forTaken = await change('someone@example.test');
  await newAccount(h, 'someone@example.test');
  expect(forTaken.status).toBe(202);
  const token = tokenIn(await mailTo('someone@example.test', 'Confirm your new email address'));
  const refused = await use(token);
  expect(refused.status).toBe(409);
  expect(refused.body.error).toMatchObject({ code: 'conflict', message: expect.stringMatching(/another account/) });
  expect(await me(cookie)).toMatchObject({ email: 'mover@example.test' });

  expect((await request(h.app).post(`${M}/password-resets`).set(SAME_ORIGIN).send({ email: 'mover@example.test' })).status).toBe(202);
  await waitFor('the reset link row', async () => (await h.runtime.db('password_resets').whereNull('used_at')).length > 0);
  expect((await change('moved@example.test')).status).toBe(202);
  expect((await use(tokenIn(await mailTo('moved@example.test', 'Confirm your new email address')))).status).toBe(200);
  const account = await me(cookie);
  expect(account.email).toBe('moved@example.test');
  expect(await h.runtime.db('password_resets').where({ account_id: account.id }).whereNull('used_at')).toHaveLength(0);
}, 60_000);
