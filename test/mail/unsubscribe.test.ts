/**
 * One-click unsubscribe (RFC 8058) over /manage/v1: the signed link works without a session and from
 * any origin, a changed or made-up one is refused clearly, and a GET (a scanner, a person's click)
 * only shows the confirm page.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import type { UnsubscribeSubject } from '../../server/mail/unsubscribe';
import { M, manageHarness } from '../manage/helpers';

let h: Harness;
const done: UnsubscribeSubject[] = [];

beforeAll(async () => {
  h = await manageHarness();
  h.runtime.services.unsubscribe.handle('visitor', async (s) => void done.push(s));
});
afterAll(() => h?.close());

const pathOf = (url: string) => new URL(url).pathname;
const subject: UnsubscribeSubject = { kind: 'visitor', siteId: 'site_one', visitorId: 'vis_one' };

test('the one-click POST unsubscribes without a session or an origin; a GET never does', async () => {
  const url = h.runtime.services.unsubscribe.url(subject);
  expect(url.startsWith(`${h.runtime.services.config.publicUrl.replace(/\/$/, '')}${M}/unsubscribe/`)).toBe(true);

  const page = await request(h.app).get(pathOf(url));
  expect(page.status).toBe(200);
  expect(page.headers['content-type']).toMatch(/^text\/html/);
  expect(page.headers['content-security-policy']).toContain("default-src 'none'");
  expect(page.text).toContain('<form method="post">');
  expect(page.text).not.toMatch(/<script|style=/);
  expect(done).toHaveLength(0);

  // As a mail provider sends it: a form body, no cookie, no Origin, no Fetch Metadata.
  const post = await request(h.app).post(pathOf(url)).type('form').send('List-Unsubscribe=One-Click');
  expect(post.status).toBe(200);
  expect(post.body.data.unsubscribed).toBe(true);
  expect(done).toEqual([subject]);

  // A person's confirm button (a browser form post) gets a page back.
  const byHand = await request(h.app).post(pathOf(url)).type('form').set('Accept', 'text/html').send('List-Unsubscribe=One-Click');
  expect(byHand.status).toBe(200);
  expect(byHand.text).toContain('Unsubscribed');
});

test('a changed, forged or cut token is a clear 404; a body other than One-Click is a 400', async () => {
  done.length = 0;
  const url = h.runtime.services.unsubscribe.url(subject);
  const [payload, mac] = pathOf(url).split('/').pop()!.split('.');
  const other = Buffer.from(JSON.stringify(['visitor', 'site_one', 'vis_other'])).toString('base64url');
  for (const token of [`${other}.${mac}`, `${payload}.${'A'.repeat(43)}`, payload, `${payload}.${mac.slice(0, 20)}`]) {
    const post = await request(h.app).post(`${M}/unsubscribe/${token}`).type('form').send('List-Unsubscribe=One-Click');
    expect(post.status).toBe(404);
    expect(post.body.error.message).toMatch(/unsubscribe link is not valid/);
    const page = await request(h.app).get(`${M}/unsubscribe/${token}`);
    expect(page.status).toBe(404);
    expect(page.body.error.message).toMatch(/unsubscribe link is not valid/);
  }
  const wrongBody = await request(h.app).post(pathOf(url)).type('form').send('List-Unsubscribe=Yes');
  expect(wrongBody.status).toBe(400);
  expect(done).toHaveLength(0);
});
