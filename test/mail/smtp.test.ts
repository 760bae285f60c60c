/**
 * Email over a real SMTP server started here (smtp-server as a capturing sink): what arrives
 * (recipients, Message-ID, List-Unsubscribe, both parts), hostile values, a relay that is down and
 * comes back, a relay that holds every message, the mail log and the test email over /manage/v1,
 * and the .eml files written when no SMTP_URL is set.
 */
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { runInTransaction } from '../../server/db/transaction';
import { mailWorkerFor } from '../../server/services';
import type { DeliveryWorker } from '../../server/delivery/engine';
import { createSmtpTransport } from '../../server/mail/transport';
import type { QueuedEmail } from '../../server/mail/queue';
import { waitFor } from '../helpers/wait';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from '../manage/helpers';
import { startSink, Sink } from './sink';

const silent = pino({ level: 'silent' });
let h: Harness;
let sink: Sink;
const workers: DeliveryWorker[] = [];

beforeAll(async () => {
  sink = await startSink();
  h = await manageHarness({ env: { SMTP_URL: sink.url, MAIL_FROM: 'Support <support@example.test>' } });
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
});

afterAll(async () => {
  await h?.close();
  await sink?.close();
});

function worker(overrides: Parameters<typeof mailWorkerFor>[2] = {}): DeliveryWorker {
  const w = mailWorkerFor(h.runtime.services, silent, { pollMs: 100, ...overrides });
  workers.push(w);
  w.start();
  return w;
}

const enqueue = (email: QueuedEmail) => runInTransaction(h.runtime.db, (trx) => h.runtime.services.mail.queue.enqueue(trx, email, Date.now()));
const rowOf = async (id: string) => (await h.runtime.services.stores.mail.find(id))!;
const arrivedFor = (to: string) => sink.captured.filter((c) => c.to.includes(to));

test('a notification arrives once with its recipient, fixed Message-ID, one-click unsubscribe and both parts; hostile values stay text', async () => {
  worker();
  const id = await enqueue({
    siteId: h.site.id,
    to: 'agent@example.test',
    template: 'notification',
    values: {
      subject: 'New message from <b>Eve</b>\r\nBcc: victim@example.test',
      body: 'Hi <script>alert(1)</script>\n<img src=x onerror=alert(2)> "quoted" & more',
      url: 'https://localhost:8443/inbox?c=1&x="><script>alert(3)</script>',
      actionLabel: 'Open <i>it</i>',
      unsubscribeUrl: 'https://localhost:8443/manage/v1/unsubscribe/tok123',
    },
  });
  await waitFor('the notification to arrive', () => arrivedFor('agent@example.test').length === 1);
  await waitFor('the email to be recorded sent', async () => (await rowOf(id)).status === 'delivered');
  const [{ to, mail, raw }] = arrivedFor('agent@example.test');
  const row = await rowOf(id);

  expect(to).toEqual(['agent@example.test']);
  expect(mail.messageId).toBe(row.message_id);
  expect(row.message_id).toMatch(/^<eml_[0-9a-z]{26}@localhost>$/);
  expect(mail.from?.value).toEqual([{ name: 'Support', address: 'support@example.test' }]);
  expect(raw).toMatch(/^List-Unsubscribe: <https:\/\/localhost:8443\/manage\/v1\/unsubscribe\/tok123>\r?$/m);
  expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/m);
  // A line break in a value cannot add a header: no Bcc, one recipient.
  expect(mail.bcc).toBeUndefined();
  expect(raw).not.toMatch(/^Bcc:/im);
  expect(mail.subject).toBe('New message from <b>Eve</b> Bcc: victim@example.test');

  // The text part says what was written, as text.
  expect(mail.text).toContain('Hi <script>alert(1)</script>');
  expect(mail.text).toContain('https://localhost:8443/manage/v1/unsubscribe/tok123');
  // The HTML part: every value escaped, so no markup of theirs survives.
  const html = String(mail.html);
  expect(html).toContain('Hi &lt;script&gt;alert(1)&lt;/script&gt;');
  expect(html).toContain('&lt;img src=x onerror=alert(2)&gt; &quot;quoted&quot; &amp; more');
  expect(html).toContain('href="https://localhost:8443/inbox?c=1&amp;x=%22%3E%3Cscript%3Ealert(3)%3C/script%3E"');
  expect(html).toContain('Open &lt;i&gt;it&lt;/i&gt;');
  // Every element is the layout's own, with its own attributes only.
  const tags = [...html.matchAll(/<\/?([a-z!]+)([^>]*)>/gi)].map((m) => [
    m[1].toLowerCase(),
    m[2]
      .replace(/="[^"]*"/g, '')
      .replace(/\/$/, '')
      .trim(),
  ]);
  for (const [name] of tags) expect(['!doctype', 'html', 'head', 'meta', 'title', 'body', 'p', 'a']).toContain(name);
  for (const [, attrs] of tags) expect(['', 'html', 'charset', 'style', 'href']).toContain(attrs);
  expect(html).toContain('<a href="https://localhost:8443/manage/v1/unsubscribe/tok123">Unsubscribe</a>');

  // Sent: its values (links that may open an account) are no longer kept.
  expect(row).toMatchObject({ status: 'delivered', attempts: 1, last_error: null, values_sealed: null });
});

test('a link that is not http(s) is not made a link', async () => {
  worker();
  await enqueue({
    siteId: h.site.id,
    to: 'links@example.test',
    template: 'notification',
    values: { subject: 'Links', body: 'text', url: 'javascript:alert(1)', unsubscribeUrl: 'data:text/html,<script>alert(1)</script>' },
  });
  await waitFor('the email to arrive', () => arrivedFor('links@example.test').length === 1);
  const [{ mail, raw }] = arrivedFor('links@example.test');
  expect(String(mail.html)).not.toContain('href');
  expect(String(mail.html)).not.toContain('javascript:');
  expect(raw).not.toMatch(/^List-Unsubscribe/m);
});

test('the relay down, then back on the same port: every email arrives exactly once', async () => {
  const probe = await startSink();
  const port = probe.port;
  await probe.close(); // nothing listens there now
  const w = worker({
    transport: createSmtpTransport({ url: `smtp://127.0.0.1:${port}` }),
    retryDelaysMs: [500, 1000, 2000, 4000, 8000],
  });
  const ids: string[] = [];
  for (let i = 0; i < 6; i++)
    ids.push(await enqueue({ siteId: h.site.id, to: `down${i}@example.test`, template: 'test', values: { siteName: 'S', requestedBy: 'o' } }));

  // Every email tried and refused at least once while nothing answers.
  await waitFor('a refused attempt of every email', async () => {
    const rows = await Promise.all(ids.map(rowOf));
    return rows.every((r) => r.status === 'pending' && r.attempts >= 1 && r.last_error !== null);
  });
  expect(w.stats.delivered).toBe(0);

  const back = await startSink({ port });
  try {
    await waitFor('every email sent', async () => (await Promise.all(ids.map(rowOf))).every((r) => r.status === 'delivered'), 30_000);
    const rows = await Promise.all(ids.map(rowOf));
    const arrived = back.captured.map((c) => c.mail.messageId);
    expect(arrived.sort()).toEqual(rows.map((r) => r.message_id).sort());
    expect(new Set(arrived).size).toBe(ids.length);
    for (const r of rows) expect(r.last_error).toBeNull();
  } finally {
    await back.close();
  }
});

test('a relay that holds every message: requests that queue emails and read the log are answered meanwhile', async () => {
  const site = await h.newSite('slow relay');
  await newMember(h, site.id, 'slow-owner@example.test', 'owner');
  const { cookie } = await signIn(h, 'slow-owner@example.test');
  const slow = await startSink({ hold: true });
  try {
    worker({ transport: createSmtpTransport({ url: slow.url }) });
    const post = () => request(h.app).post(`${M}/sites/${site.id}/mail-log/test`).set(SAME_ORIGIN).set('Cookie', cookie);
    const first = await post();
    expect(first.status).toBe(202);
    expect(first.body.data).toMatchObject({ recipient: 'slow-owner@example.test', status: 'queued', destination: `127.0.0.1:${sink.port}` });

    // The relay has the message and says nothing.
    await waitFor('the relay to hold the first message', () => slow.holding === 1);
    let answered = 0;
    for (let i = 0; i < 3; i++) {
      expect((await post()).status).toBe(202);
      const log = await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', cookie);
      expect(log.status).toBe(200);
      answered += 2;
    }
    // Every request was answered while the first email still waited for the relay.
    expect(answered).toBe(6);
    expect(slow.holding).toBeGreaterThanOrEqual(1);
    const log = await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', cookie);
    expect(log.body.data).toHaveLength(4);
    expect(log.body.data.find((e: { id: string }) => e.id === first.body.data.id).status).toBe('queued');

    slow.release();
    await waitFor('all four sent', async () => {
      const l = await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', cookie);
      return l.body.data.every((e: { status: string }) => e.status === 'sent');
    });
    expect(slow.captured).toHaveLength(4);
  } finally {
    slow.release();
    await slow.close();
  }
});

test('the mail log: owners only, no bodies, paged; the test email goes to the owner and is audited', async () => {
  const site = await h.newSite('mail log');
  const owner = await newMember(h, site.id, 'log-owner@example.test', 'owner');
  await newMember(h, site.id, 'log-agent@example.test', 'agent');
  const ownerCookie = (await signIn(h, 'log-owner@example.test')).cookie;
  const agentCookie = (await signIn(h, 'log-agent@example.test')).cookie;
  worker();

  for (let i = 0; i < 3; i++) {
    expect((await request(h.app).post(`${M}/sites/${site.id}/mail-log/test`).set(SAME_ORIGIN).set('Cookie', ownerCookie)).status).toBe(202);
  }
  expect((await request(h.app).post(`${M}/sites/${site.id}/mail-log/test`).set(SAME_ORIGIN).set('Cookie', agentCookie)).status).toBe(403);
  expect((await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', agentCookie)).status).toBe(403);
  // Without Sec-Fetch-Site or Origin, a cookie cannot send one.
  expect((await request(h.app).post(`${M}/sites/${site.id}/mail-log/test`).set('Cookie', ownerCookie)).status).toBe(403);

  await waitFor('the test emails to arrive', () => arrivedFor('log-owner@example.test').length === 3);
  const arrived = arrivedFor('log-owner@example.test')[0].mail;
  expect(arrived.subject).toBe('Test email from mail log');
  expect(arrived.text).toContain('sent by log-owner@example.test');
  expect(String(arrived.html)).toContain('sent by log-owner@example.test');

  await waitFor('the log to show them sent', async () => {
    const l = await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', ownerCookie);
    return l.body.data.length === 3 && l.body.data.every((e: { status: string }) => e.status === 'sent');
  });
  const first = await request(h.app).get(`${M}/sites/${site.id}/mail-log?limit=2`).set('Cookie', ownerCookie);
  expect(first.body.data).toHaveLength(2);
  expect(first.body.page.hasMore).toBe(true);
  expect(Object.keys(first.body.data[0]).sort()).toEqual(['attempts', 'createdAt', 'id', 'lastError', 'recipient', 'status', 'template', 'updatedAt']);
  expect(first.body.data[0]).toMatchObject({ recipient: 'log-owner@example.test', template: 'test', status: 'sent', attempts: 1, lastError: null });
  const rest = await request(h.app).get(`${M}/sites/${site.id}/mail-log?limit=2&cursor=${first.body.page.nextCursor}`).set('Cookie', ownerCookie);
  expect(rest.body.data).toHaveLength(1);
  expect(rest.body.page).toEqual({ nextCursor: null, hasMore: false });
  // Another site's cursor, or its log, is not this one's.
  expect((await request(h.app).get(`${M}/sites/${h.site.id}/mail-log`).set('Cookie', ownerCookie)).status).toBe(404);

  const audit = await request(h.app).get(`${M}/sites/${site.id}/audit-log`).set('Cookie', ownerCookie);
  const queued = audit.body.data.filter((e: { action: string }) => e.action === 'mail.test_queued');
  expect(queued).toHaveLength(3);
  expect(queued[0].actor).toMatchObject({ type: 'account', accountId: owner.id });
});

test('without SMTP_URL each email is written as an .eml file under DATA_DIR/mail/', async () => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const w = mailWorkerFor(h.runtime.services, logger, { pollMs: 100, mail: { ...h.config.mail, smtpUrl: undefined } });
  workers.push(w);
  w.start();
  const id = await enqueue({ siteId: h.site.id, to: 'file@example.test', template: 'test', values: { siteName: 'Files', requestedBy: 'me' } });
  await waitFor('the email to be written', async () => (await rowOf(id)).status === 'delivered');
  const file = path.join(h.config.dataDir, 'mail', `${id}.eml`);
  const text = fs.readFileSync(file, 'utf8');
  expect(text).toMatch(/^To: file@example.test$/m);
  expect(text).toContain(`Message-ID: ${(await rowOf(id)).message_id}`);
  expect(text).toContain('Content-Type: multipart/alternative');
  expect(lines.some((l) => l.includes(file) && l.includes('no SMTP_URL set'))).toBe(true);
});

test('an invitation is emailed to the invited address; the owner still sees its link once', async () => {
  const site = await h.newSite('Shop <b>&</b> Co');
  await newMember(h, site.id, 'inviting-owner@example.test', 'owner');
  const { cookie } = await signIn(h, 'inviting-owner@example.test');
  worker();
  const made = await request(h.app)
    .post(`${M}/sites/${site.id}/invitations`)
    .set(SAME_ORIGIN)
    .set('Cookie', cookie)
    .send({ email: 'invited@example.test', role: 'agent' });
  expect(made.status).toBe(201);
  const url: string = made.body.data.url;
  await waitFor('the invitation email', () => arrivedFor('invited@example.test').length === 1);
  const { mail } = arrivedFor('invited@example.test')[0];
  expect(mail.subject).toBe('Join Shop <b>&</b> Co on the chat service');
  expect(mail.text).toContain('inviting-owner@example.test invites you to join Shop <b>&</b> Co as an agent');
  expect(mail.text).toContain(url);
  expect(String(mail.html)).toContain('Shop &lt;b&gt;&amp;&lt;/b&gt; Co');
  expect(String(mail.html)).toContain(`href="${url}"`);
  const log = await request(h.app).get(`${M}/sites/${site.id}/mail-log`).set('Cookie', cookie);
  expect(log.body.data[0]).toMatchObject({ recipient: 'invited@example.test', template: 'invitation' });
});
