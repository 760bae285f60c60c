/**
 * Agents told of waiting visitors, through a real SMTP sink: who is emailed when a visitor starts a
 * conversation (the three settings, presence), one email for a burst, the scheduled check of a
 * visitor left waiting (on the delivery engine, two workers at once), hostile visitor text, and the
 * emails' one-click unsubscribe.
 */
import pino from 'pino';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { alertCheckWorkerFor } from '../../server/services';
import { waitFor } from '../helpers/wait';
import { M, newMember, SAME_ORIGIN, signIn } from '../manage/helpers';
import type { Sink } from './sink';
import { mailHarness, MailHarness } from './harness';
import { listenHttps } from '../helpers/harness';
import { openSse } from '../window/helpers';

let h: Harness;
let sink: Sink;
let mail: MailHarness;
let offset = 0;
let site: string;
const people: Record<'owner' | 'assigned' | 'none' | 'watching', { id: string; email: string }> = {} as never;

beforeAll(async () => {
  mail = await mailHarness({ now: () => Date.now() + offset });
  ({ h, sink } = mail);
  site = (await h.newSite('Acme <b>shop</b>')).id;
  people.owner = await newMember(h, site, 'owner@alerts.test', 'owner');
  people.assigned = await newMember(h, site, 'assigned@alerts.test', 'agent');
  people.none = await newMember(h, site, 'none@alerts.test', 'agent');
  people.watching = await newMember(h, site, 'watching@alerts.test', 'agent');
  const alerts = h.runtime.services.agentAlerts.service;
  const as = (p: { id: string; email: string }) => ({ manager: { accountId: p.id, email: p.email, via: 'session' as const }, clientIp: null });
  await alerts.setSetting(as(people.assigned), site, { mode: 'assigned', waitMinutes: 5 });
  await alerts.setSetting(as(people.none), site, { mode: 'none', waitMinutes: 5 });
});

afterAll(async () => {
  await mail?.close();
});

const to = (email: string) => sink.captured.filter((c) => c.to.includes(email));
const settle = () => waitFor('the queue to drain', async () => (await h.runtime.db('emails').where({ status: 'pending' }).count({ n: '*' }))[0].n == 0);

test('a new conversation emails the away members who chose every conversation, once for a burst; hostile text stays text', async () => {
  const leave = h.runtime.services.presence.open(site, people.watching.id);
  const hostile = '<script>alert(1)</script><img src=x onerror=alert(2)> **bold** [click](javascript:alert(3))';
  const first = await h.visitorSay(site, 'v-burst', hostile);
  for (let i = 0; i < 50; i++) await h.visitorSay(site, 'v-burst', `message ${i}`);
  await settle();
  leave();

  // The owner (default: every conversation) alone: `assigned` (nobody is), `none`, and the one watching the inbox are not emailed.
  expect(to(people.owner.email)).toHaveLength(1);
  for (const p of [people.assigned, people.none, people.watching]) expect(to(p.email)).toHaveLength(0);
  const { mail, raw } = to(people.owner.email)[0];
  expect(mail.subject).toBe('A visitor started a conversation on Acme <b>shop</b>');
  const html = String(mail.html);
  expect(html).not.toMatch(/<script|<img|<b>|href="javascript:/i);
  expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  // The window's messages are plain text: quoted as typed, as the window and the inbox show them.
  expect(mail.text).toContain(`Visitor: ${hostile}`);
  expect(html).toContain('**bold** [click](javascript:alert(3))');
  expect(mail.text).toContain(`/dashboard/sites/${site}/inbox?conversation=${first.conversation.id}`);
  expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/m);
});

test('a visitor left waiting: the scheduled check emails the away members whose wait ran out, once, with two workers', async () => {
  sink.captured.length = 0;
  // The visitor wrote 20 minutes ago; nobody answered.
  // `watching` had the inbox open then, and has closed it since.
  offset = -20 * 60_000;
  const leave = h.runtime.services.presence.open(site, people.watching.id);
  const said = await h.visitorSay(site, 'v-wait', 'anyone there?');
  leave();
  await h.runtime.db('conversations').where({ id: said.conversation.id }).update({ assignee_id: people.assigned.id });
  offset = 0;
  await settle();
  expect(to(people.owner.email)).toHaveLength(1); // the start, 20 minutes ago
  expect(to(people.watching.email)).toHaveLength(0);
  const workers = [0, 1].map((i) => alertCheckWorkerFor(h.runtime.services, pino({ level: 'silent' }), { pollMs: 50, owner: `checks-${i}` }));
  workers.forEach((w) => w.start());
  try {
    await waitFor('the check to run', async () => {
      const row = await h.runtime.db('agent_alert_checks').where({ conversation_id: said.conversation.id }).first();
      // Ran and recorded: no claim holds it, and it is done or due later.
      return row && row.lease_owner === null && (row.status !== 'pending' || Number(row.next_attempt_at) > Date.now());
    });
    await settle();
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
  // Owner: their period since the start has run out; assigned: it is theirs; watching: away now.
  expect(to(people.owner.email)).toHaveLength(2);
  expect(to(people.assigned.email)).toHaveLength(1);
  expect(to(people.watching.email)).toHaveLength(1);
  expect(to(people.none.email)).toHaveLength(0);
  expect(to(people.assigned.email)[0].mail.subject).toMatch(/^A visitor has waited 20 min for a reply on /);
});

test('a visitor who was answered is not emailed about', async () => {
  sink.captured.length = 0;
  offset = -20 * 60_000;
  const said = await h.visitorSay(site, 'v-answered', 'hello');
  offset = 0;
  await settle();
  sink.captured.length = 0;
  await h.runtime.services.window.chat.agentSay(said.conversation.id, 'Hi! How can I help?');
  expect(await h.runtime.services.agentAlerts.service.check(site, said.conversation.id)).toBeNull();
  await settle();
  expect(sink.captured).toHaveLength(0);
});

test("the email's one-click unsubscribe sets the member's setting to none, without a session; the setting over the API", async () => {
  const alerts = h.runtime.services.agentAlerts.service;
  const url = h.runtime.services.unsubscribe.url({ kind: 'member', siteId: site, accountId: people.watching.id });
  // A GET (a scanner) changes nothing.
  expect((await request(h.app).get(new URL(url).pathname)).status).toBe(200);
  expect((await alerts.setting(people.watching.id, site)).mode).toBe('all');
  const post = await request(h.app).post(new URL(url).pathname).type('form').send('List-Unsubscribe=One-Click');
  expect(post.status).toBe(200);
  expect((await alerts.setting(people.watching.id, site)).mode).toBe('none');

  const { cookie } = await signIn(h, people.watching.email);
  const got = await request(h.app).get(`${M}/sites/${site}/me/alerts`).set('Cookie', cookie);
  expect(got.body).toEqual({ data: { mode: 'none', waitMinutes: 5 } });
  const put = await request(h.app).put(`${M}/sites/${site}/me/alerts`).set(SAME_ORIGIN).set('Cookie', cookie).send({ mode: 'assigned', waitMinutes: 12 });
  expect(put.body).toEqual({ data: { mode: 'assigned', waitMinutes: 12 } });
  const bad = await request(h.app).put(`${M}/sites/${site}/me/alerts`).set(SAME_ORIGIN).set('Cookie', cookie).send({ mode: 'sometimes', waitMinutes: 0 });
  expect(bad.status).toBe(400);
});

test("a member's live inbox stream is their presence: emailed neither while it is open, and again once it closed", async () => {
  const server = await listenHttps(h.app);
  const { cookie } = await signIn(h, people.owner.email);
  const presence = h.runtime.services.presence;
  try {
    const stream = await openSse(server, `${M}/sites/${site}/inbox/events`, { Cookie: cookie });
    expect(stream.status).toBe(200);
    await waitFor('the stream to count as presence', async () => (await presence.online(site)).has(people.owner.id));
    sink.captured.length = 0;
    await h.visitorSay(site, 'v-while-open', 'hello, someone watching?');
    await settle();
    expect(to(people.owner.email)).toHaveLength(0);
    stream.close();
    await waitFor('the closed stream to end presence', async () => !(await presence.online(site)).has(people.owner.id));
    await h.visitorSay(site, 'v-after-close', 'hello again');
    await settle();
    expect(to(people.owner.email)).toHaveLength(1);
  } finally {
    await server.close();
  }
});
