/**
 * Visitors told of late replies, through the real entries and a real SMTP server (smtp-server as a
 * capturing sink), on both engines: the business hours (owners only, each problem named), the
 * window's away state and email form, an agent's replies emailed once per period when the window
 * did not show them and not when it did, hostile text in the email, the inbox's panel, and the
 * one-click unsubscribe that stops them.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { bearer } from '../helpers/harness';
import { mailWorkerFor, replyNoticeWorkerFor } from '../../server/services';
import type { DeliveryWorker } from '../../server/delivery/engine';
import { DAYS } from '../../server/sites/business-hours';
import { waitFor } from '../helpers/wait';
import { manageHarness, memberWithToken, withToken } from '../manage/helpers';
import { allowOrigins, auth, getToken, ORIGIN, TokenAnswer, w } from '../window/helpers';
import { startSink, Sink } from '../mail/sink';

const silent = pino({ level: 'silent' });
let h: Harness;
let sink: Sink;
let site: string;
let owner: { id: string; token: string };
let agent: { id: string; token: string };
const workers: DeliveryWorker[] = [];

beforeAll(async () => {
  sink = await startSink();
  h = await manageHarness({ env: { SMTP_URL: sink.url, MAIL_FROM: 'Support <support@example.test>', REPLY_EMAIL_DELAY_SECONDS: '1' } });
  site = h.site.id;
  await allowOrigins(h, site);
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, site, 'agent@example.com', 'agent');
  for (const make of [mailWorkerFor, replyNoticeWorkerFor]) {
    const worker = make(h.runtime.services, silent, { pollMs: 100 });
    worker.start();
    workers.push(worker);
  }
});

afterAll(async () => {
  await Promise.all(workers.map((x) => x.stop()));
  await h?.close();
  await sink?.close();
});

const fromPage = (r: request.Test, t: TokenAnswer) => r.set('Origin', ORIGIN).set(auth(t.token));
const availability = async (t: TokenAnswer) => (await fromPage(request(h.app).get(w(site, '/availability')), t).expect(200)).body.data;
const leaveEmail = (t: TokenAnswer, body: object) => fromPage(request(h.app).post(w(site, '/reply-email')), t).send(body);
async function say(t: TokenAnswer, content: string): Promise<string> {
  const res = await fromPage(request(h.app).post(w(site, '/messages')), t).send({ content, clientMessageId: randomUUID() });
  expect(res.status).toBe(201);
  return res.body.data.conversation.id;
}
const apiReply = async (conversationId: string, content: string) =>
  (await request(h.app).post(`/api/v1/conversations/${conversationId}/messages`).set(bearer(h.site.key)).send({ content }).expect(201)).body.data;
const allWeek = (ranges: [string, string][]) => Object.fromEntries(DAYS.map((d) => [d, ranges]));
const emailsTo = (to: string) => sink.captured.filter((c) => c.to.includes(to));
const noticesOf = (conversationId: string) => h.runtime.db('reply_notices').where({ conversation_id: conversationId });
const panel = async (conversationId: string) =>
  (await withToken(h, agent, 'get', `/sites/${site}/inbox/conversations/${conversationId}/visitor`).expect(200)).body.data;

/** A visitor who wrote from a page and left its email for replies. */
async function subscribedVisitor(email: string, first: string) {
  const t = await getToken(h.app, site);
  const conversation = await say(t, first);
  await fromPage(request(h.app).post(w(site, '/context')), t)
    .send({ page: { url: `${ORIGIN}/pricing?plan=pro`, title: 'Pricing' } })
    .expect(200);
  const res = await leaveEmail(t, { email, consent: true });
  expect(res.status).toBe(200);
  expect(res.body.data).toEqual({ replyEmails: 'subscribed' });
  return { t, conversation };
}

describe('business hours', () => {
  test('owners set them; a bad zone and bad ranges are each named; agents may not', async () => {
    const bad = await withToken(h, owner, 'put', `/sites/${site}/business-hours`, {
      enabled: true,
      timeZone: 'Mars/Olympus',
      week: {
        ...allWeek([]),
        mon: [['10:00', '09:00']],
        tue: [
          ['09:00', '12:00'],
          ['11:00', '13:00'],
        ],
      },
      awayMessage: null,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    expect(bad.body.error.details.map((d: { path: string }) => d.path)).toEqual(['/body/timeZone', '/body/week/mon/0', '/body/week/tue/1']);

    const notTime = await withToken(h, owner, 'put', `/sites/${site}/business-hours`, {
      enabled: true,
      timeZone: 'UTC',
      week: allWeek([['9am', '5pm']]),
      awayMessage: null,
    });
    expect(notTime.status).toBe(400);

    const hours = { enabled: true, timeZone: 'Europe/Berlin', week: allWeek([['00:00', '24:00']]), awayMessage: 'We answer within a day.' };
    await withToken(h, agent, 'put', `/sites/${site}/business-hours`, hours).expect(403);
    // Away while nobody is online unless the owner says otherwise: today's behaviour is the default.
    const answered = { ...hours, awayWhenNoAgentOnline: true };
    expect((await withToken(h, owner, 'put', `/sites/${site}/business-hours`, hours).expect(200)).body.data).toEqual(answered);
    expect((await withToken(h, owner, 'get', `/sites/${site}/business-hours`).expect(200)).body.data).toEqual(answered);
  });
});

describe('the window', () => {
  test('away when no member has the inbox open or outside the hours; online otherwise', async () => {
    const t = await getToken(h.app, site);
    await withToken(h, owner, 'put', `/sites/${site}/business-hours`, {
      enabled: true,
      timeZone: 'UTC',
      week: allWeek([['00:00', '24:00']]),
      awayMessage: 'Back <b>soon</b>',
    }).expect(200);
    expect(await availability(t)).toEqual({ state: 'away', reason: 'no_agent_online', nextOpenAt: null, awayMessage: 'Back <b>soon</b>', replyEmails: 'none' });

    const close = h.runtime.services.presence.open(site, agent.id);
    try {
      expect(await availability(t)).toEqual({ state: 'online', reason: null, nextOpenAt: null, awayMessage: null, replyEmails: 'none' });
      // Hours only on a day other than today: closed, and the next opening is that day at 09:00 UTC.
      const today = new Date();
      const other = DAYS[(today.getUTCDay() + 6 + 2) % 7];
      await withToken(h, owner, 'put', `/sites/${site}/business-hours`, {
        enabled: true,
        timeZone: 'UTC',
        week: { ...allWeek([]), [other]: [['09:00', '10:00']] },
        awayMessage: null,
      }).expect(200);
      const away = await availability(t);
      expect(away).toMatchObject({ state: 'away', reason: 'closed', awayMessage: null });
      const expected = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() + 2, 9));
      expect(away.nextOpenAt).toBe(expected.toISOString());
    } finally {
      close();
      await withToken(h, owner, 'put', `/sites/${site}/business-hours`, { enabled: false, timeZone: 'UTC', week: allWeek([]), awayMessage: null }).expect(200);
    }
  });

  test('a site answered through the API is not away for want of a member online, only outside its hours; a PUT without the switch keeps it', async () => {
    const t = await getToken(h.app, site);
    const put = (body: Record<string, unknown>) => withToken(h, owner, 'put', `/sites/${site}/business-hours`, body).expect(200);
    const always = { enabled: true, timeZone: 'UTC', week: allWeek([['00:00', '24:00']]), awayMessage: null };
    try {
      expect((await put({ ...always, awayWhenNoAgentOnline: false })).body.data.awayWhenNoAgentOnline).toBe(false);
      expect(await availability(t)).toEqual({ state: 'online', reason: null, nextOpenAt: null, awayMessage: null, replyEmails: 'none' });
      // A client that does not know the switch (an older dashboard, a script) leaves it as it is.
      expect((await put({ ...always, awayMessage: 'Later' })).body.data.awayWhenNoAgentOnline).toBe(false);
      expect((await availability(t)).state).toBe('online');
      // Outside the hours it is away all the same.
      const other = DAYS[(new Date().getUTCDay() + 6 + 2) % 7];
      await put({ ...always, week: { ...allWeek([]), [other]: [['09:00', '10:00']] } });
      expect(await availability(t)).toMatchObject({ state: 'away', reason: 'closed' });
      // No hours at all and the switch off: never away.
      await put({ enabled: false, timeZone: 'UTC', week: allWeek([]), awayMessage: null });
      expect((await availability(t)).state).toBe('online');
      await put({ enabled: false, timeZone: 'UTC', week: allWeek([]), awayMessage: null, awayWhenNoAgentOnline: true });
      expect(await availability(t)).toMatchObject({ state: 'away', reason: 'no_agent_online' });
    } finally {
      await put({ enabled: false, timeZone: 'UTC', week: allWeek([]), awayMessage: null, awayWhenNoAgentOnline: true });
    }
  });

  test('the email form: a bad email or no consent is a clear 400; a good one is the visitor email, unverified, in the inbox panel', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t, 'anyone there?');
    const bad = await leaveEmail(t, { email: 'not an email', consent: true });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    expect(bad.body.error.details[0].path).toBe('/body/email');
    const noConsent = await leaveEmail(t, { email: 'v@example.test', consent: false });
    expect(noConsent.status).toBe(400);
    expect(noConsent.body.error.details).toEqual([{ path: '/body/consent', message: 'must be true' }]);
    expect((await panel(conversation)).replyEmails).toBe('none');

    await leaveEmail(t, { email: 'v@example.test', consent: true }).expect(200);
    expect(await availability(t)).toMatchObject({ replyEmails: 'subscribed' });
    expect(await panel(conversation)).toMatchObject({ email: 'v@example.test', emailVerified: false, replyEmails: 'subscribed' });
  });
});

describe('replies by email', () => {
  test('replies the window did not show make one email with the last messages, the page link and unsubscribe; hostile text stays text', async () => {
    const { conversation } = await subscribedVisitor('late@example.test', 'Hi <script>alert(1)</script> **bold**');
    await apiReply(conversation, 'Hello <img src=x onerror=alert(2)> [click](javascript:alert(3))');
    await apiReply(conversation, 'Second answer');
    await waitFor('the reply email', () => emailsTo('late@example.test').length === 1);
    await waitFor('the notice to end', async () => (await noticesOf(conversation)).every((n) => n.status === 'delivered'));
    expect(await noticesOf(conversation)).toHaveLength(1); // both replies in one notice: one email

    const [{ mail, raw }] = emailsTo('late@example.test');
    expect(mail.subject).toBe('New reply from Test site');
    expect(mail.text).toContain('You: Hi <script>alert(1)</script> **bold**');
    expect(mail.text).toContain('Second answer');
    expect(mail.text).toContain(`${ORIGIN}/pricing`);
    const html = String(mail.html);
    // No markup survives: tags arrive escaped, and no link is made of a message's text.
    expect(html).not.toMatch(/<script|<img|href="javascript:/i);
    expect(html.match(/<a /g)).toHaveLength(2); // the page link and the unsubscribe line
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain(`href="${ORIGIN}/pricing"`);
    expect(raw).toMatch(/^List-Unsubscribe:\s+<https:\/\/localhost:8443\/manage\/v1\/unsubscribe\/[^>]+>\r?$/m);
    expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/m);
  });

  test('a reply to a visitor who left no email starts no notice; leaving one, the very next reply does', async () => {
    const t = await getToken(h.app, site);
    const conversation = await say(t, 'no email yet');
    await apiReply(conversation, 'answer before the email');
    expect(await noticesOf(conversation)).toHaveLength(0);
    expect((await leaveEmail(t, { email: 'later@example.test', consent: true })).status).toBe(200);
    await apiReply(conversation, 'answer after the email');
    expect(await noticesOf(conversation)).toHaveLength(1);
  });

  test('a reply the window marked seen is not emailed', async () => {
    const { t, conversation } = await subscribedVisitor('reader@example.test', 'question');
    const reply = await apiReply(conversation, 'answer you saw');
    await fromPage(request(h.app).post(w(site, `/conversations/${conversation}/seen`)), t)
      .send({ messageId: reply.id })
      .expect(200);
    await waitFor('the notice to end', async () => (await noticesOf(conversation)).some((n) => n.status === 'delivered'));
    const [notice] = await noticesOf(conversation);
    expect(notice.last_error).toBe('not sent: the visitor saw the replies in the window');
    expect(emailsTo('reader@example.test')).toHaveLength(0);
  });

  test('one-click unsubscribe stops the emails; agents still see the email, marked unsubscribed', async () => {
    const { conversation } = await subscribedVisitor('leaver@example.test', 'first');
    await apiReply(conversation, 'first answer');
    await waitFor('the first email', () => emailsTo('leaver@example.test').length === 1);
    const url = new URL(/href="(https:\/\/localhost:8443\/manage\/v1\/unsubscribe\/[^"]+)"/.exec(String(emailsTo('leaver@example.test')[0].mail.html))![1]);
    await request(h.app).post(url.pathname).type('form').send('List-Unsubscribe=One-Click').expect(200);
    expect(await panel(conversation)).toMatchObject({ email: 'leaver@example.test', replyEmails: 'unsubscribed' });

    await apiReply(conversation, 'second answer');
    // No notice is started for an unsubscribed visitor: the one row is the first, ended.
    await waitFor('the first notice to end', async () => (await noticesOf(conversation)).every((n) => n.status === 'delivered'));
    expect(await noticesOf(conversation)).toHaveLength(1);
    expect(emailsTo('leaver@example.test')).toHaveLength(1);
  });
});
