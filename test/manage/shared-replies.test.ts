/**
 * A site's shared replies through /manage/v1 (issue 25, item 7): owners keep them, every member
 * lists them and gets them filled in for a conversation (the composer's `/` picker), with the
 * visitor's display name, the agent's name as the window shows it and the site's name. Roles,
 * limits, bad input, another site's replies and conversations (404), the import of a browser's
 * replies, and the audit log. The real app, response validation on, both engines.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, memberWithToken, withToken } from './helpers';
import { friendlyName } from '../../server/visitors/display-name';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
let siteB: { id: string };
let owner: { id: string; token: string };
let agent: { id: string; token: string };
let ownerB: { id: string; token: string };

type Method = Parameters<typeof withToken>[2];
const as = (who: { token: string }, method: Method, path: string, body?: object) => withToken(h, who, method, path, body);
const replies = (siteId = h.site.id) => `/sites/${siteId}/shared-replies`;
let visitors = 0;
/** A conversation of `siteId` started by a new visitor; answers its id and the visitor's. */
const conversation = async (siteId = h.site.id) => {
  const visitorId = `shopper-${++visitors}`;
  const r = await h.visitorSay(siteId, visitorId, 'Hello?');
  return { id: r.conversation.id as string, visitorId };
};
const filled = (who: { token: string }, conversationId: string, siteId = h.site.id) =>
  as(who, 'get', `/sites/${siteId}/inbox/conversations/${conversationId}/shared-replies`);
const create = (title: string, body: string, who = owner, siteId = h.site.id) => as(who, 'post', replies(siteId), { title, body });

beforeAll(async () => {
  h = await manageHarness({ now: () => (clock += 1) });
  siteB = await h.newSite('Other site');
  owner = await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, h.site.id, 'agent@example.com', 'agent');
  ownerB = await memberWithToken(h, siteB.id, 'owner-b@example.com', 'owner');
});
afterAll(() => h.close());

test('an owner adds, changes and deletes a reply; every member lists them by title; each change is audited', async () => {
  const made = await create('  Order number  ', 'Could you send me your **order number**?');
  expect(made.status).toBe(201);
  expect(made.body.data).toEqual({
    id: expect.stringMatching(/^srp_[0-9a-hjkmnp-tv-z]{26}$/),
    title: 'Order number',
    body: 'Could you send me your **order number**?',
    createdBy: owner.id,
    createdAt: expect.any(String),
    updatedAt: expect.any(String),
  });
  const id = made.body.data.id;
  expect((await create('anything else', 'Is there anything else?')).status).toBe(201);

  const listed = await as(agent, 'get', replies());
  expect(listed.status).toBe(200);
  expect(listed.body.data.map((r: { title: string }) => r.title)).toEqual(['anything else', 'Order number']);

  const changed = await as(owner, 'patch', `${replies()}/${id}`, { body: 'Your order number, please.' });
  expect(changed.status).toBe(200);
  expect(changed.body.data).toMatchObject({ id, title: 'Order number', body: 'Your order number, please.' });
  expect(Date.parse(changed.body.data.updatedAt)).toBeGreaterThan(Date.parse(changed.body.data.createdAt));
  expect((await as(owner, 'patch', `${replies()}/${id}`, { title: 'Order' })).body.data.title).toBe('Order');

  expect((await as(owner, 'delete', `${replies()}/${id}`)).status).toBe(204);
  expect((await as(owner, 'delete', `${replies()}/${id}`)).status).toBe(404);
  expect((await as(agent, 'get', replies())).body.data.map((r: { title: string }) => r.title)).toEqual(['anything else']);

  const audit = (await as(owner, 'get', `/sites/${h.site.id}/audit-log?limit=100`)).body.data as { action: string; objectId: string }[];
  const mine = audit.filter((e) => e.action.startsWith('shared_reply')).map((e) => [e.action, e.objectId]);
  expect(mine).toEqual(
    expect.arrayContaining([
      ['shared_reply.created', id],
      ['shared_reply.updated', id],
      ['shared_reply.deleted', id],
    ]),
  );
  // Clean up for the tests below.
  for (const r of (await as(owner, 'get', replies())).body.data) await as(owner, 'delete', `${replies()}/${r.id}`);
});

test('an agent reads but cannot change; another site’s replies and conversations are 404 like missing ones', async () => {
  const mine = (await create('Mine', 'Site A only')).body.data;
  const theirs = (await create('Theirs', 'Site B only', ownerB, siteB.id)).body.data;
  const conv = await conversation();
  const convB = await conversation(siteB.id);

  expect((await create('Agent', 'text', agent)).status).toBe(403);
  expect((await as(agent, 'patch', `${replies()}/${mine.id}`, { title: 'x' })).status).toBe(403);
  expect((await as(agent, 'delete', `${replies()}/${mine.id}`)).status).toBe(403);
  expect((await as(agent, 'post', `/sites/${h.site.id}/shared-reply-imports`, { replies: [{ title: 'a', body: 'b' }] })).status).toBe(403);
  expect((await filled(agent, conv.id)).status).toBe(200);

  // Not a member of site B: every operation there is 404.
  expect((await as(owner, 'get', replies(siteB.id))).status).toBe(404);
  expect((await create('x', 'y', owner, siteB.id)).status).toBe(404);
  expect((await filled(owner, convB.id, siteB.id)).status).toBe(404);
  // Site B's reply and conversation through site A's path: 404, and nothing changed.
  expect((await as(owner, 'patch', `${replies()}/${theirs.id}`, { title: 'Stolen' })).status).toBe(404);
  expect((await as(owner, 'delete', `${replies()}/${theirs.id}`)).status).toBe(404);
  expect((await filled(owner, convB.id)).status).toBe(404);
  expect((await as(ownerB, 'get', replies(siteB.id))).body.data).toEqual([expect.objectContaining({ id: theirs.id, title: 'Theirs', body: 'Site B only' })]);
  // Site B's list holds none of A's.
  const filledB = await filled(ownerB, convB.id, siteB.id);
  expect(filledB.body.data.map((r: { title: string }) => r.title)).toEqual(['Theirs']);
  // Without a credential: 401.
  expect((await request(h.app).get(`${M}${replies()}`)).status).toBe(401);
  await as(owner, 'delete', `${replies()}/${mine.id}`);
});

test('titles are unique without regard to case (409); bad input is a 400 with the field named', async () => {
  const first = (await create('Greeting', 'Hello!')).body.data;
  const dup = await create('GREETING', 'Hi!');
  expect(dup.status).toBe(409);
  expect(dup.body.error.code).toBe('conflict');
  const other = (await create('Goodbye', 'Bye!')).body.data;
  expect((await as(owner, 'patch', `${replies()}/${other.id}`, { title: 'greeting' })).status).toBe(409);
  // Its own title in another case is no conflict.
  expect((await as(owner, 'patch', `${replies()}/${first.id}`, { title: 'greeting' })).body.data.title).toBe('greeting');

  const bad: [string, object, string?][] = [
    ['no title', { body: 'x' }],
    ['blank title', { title: '   ', body: 'x' }, '/body/title'],
    ['title over 60', { title: 'x'.repeat(61), body: 'x' }],
    ['title of 61 code points', { title: '😀'.repeat(61), body: 'x' }],
    ['title with a line break', { title: 'a\nb', body: 'x' }],
    ['title with a bidi override', { title: 'Support\u202Etroppus', body: 'x' }, '/body/title'],
    ['blank body', { title: 'Blank', body: ' \n ' }, '/body/body'],
    ['body over 10,000', { title: 'Long', body: 'x'.repeat(10_001) }],
    ['body with a control character', { title: 'Bell', body: 'ding\u0007' }, '/body/body'],
    ['unknown placeholder', { title: 'Typo', body: 'Hi {visitor.nmae}' }, '/body/body'],
    ['unknown field', { title: 'Extra', body: 'x', shared: true }],
    ['not JSON text', { title: 5, body: 'x' }],
  ];
  for (const [what, body, path] of bad) {
    const res = await as(owner, 'post', replies(), body);
    expect([what, res.status, res.body.error?.code]).toEqual([what, 400, 'invalid_request']);
    if (path) expect(res.body.error.details).toEqual([expect.objectContaining({ path })]);
  }
  // Exactly at the limits, and a tab and emoji in the text, are fine.
  const edge = await create('😀'.repeat(60), `${'x'.repeat(9_990)}\tok 👩‍💻`);
  expect(edge.status).toBe(201);
  // Braces that are not placeholders are text.
  expect((await create('Braces', 'Use {order} or {{x}} as written')).status).toBe(201);

  expect((await as(owner, 'patch', `${replies()}/${first.id}`, {})).status).toBe(400);
  expect((await as(owner, 'patch', `${replies()}/not-an-id`, { title: 'x' })).status).toBe(400);
  expect((await as(owner, 'patch', `${replies()}/srp_00000000000000000000000000`, { title: 'x' })).status).toBe(404);
  for (const r of (await as(owner, 'get', replies())).body.data) await as(owner, 'delete', `${replies()}/${r.id}`);
});

test('a site keeps at most 200; the import adds what it can and says why it left out the rest, audited once', async () => {
  const batch = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ title: `Reply ${from + i}`, body: `Text ${from + i}` }));
  const first = await as(owner, 'post', `/sites/${h.site.id}/shared-reply-imports`, {
    replies: [...batch(1, 3), { title: 'reply 2', body: 'same title, other case' }, { title: 'Bad', body: 'Hi {agent.nick}' }, { title: '', body: 'x' }],
  });
  expect(first.status).toBe(200);
  expect(first.body.data.imported.map((r: { title: string }) => r.title)).toEqual(['Reply 1', 'Reply 2', 'Reply 3']);
  expect(first.body.data.skipped).toEqual([
    { title: 'reply 2', reason: 'duplicate', message: expect.any(String) },
    { title: 'Bad', reason: 'invalid', message: expect.stringContaining('{agent.nick}') },
    { title: '', reason: 'invalid', message: expect.any(String) },
  ]);
  const second = await as(owner, 'post', `/sites/${h.site.id}/shared-reply-imports`, { replies: batch(3, 199) });
  expect(second.body.data.imported).toHaveLength(197); // 3 held + 197 = 200
  expect(second.body.data.skipped[0]).toMatchObject({ title: 'Reply 3', reason: 'duplicate' });
  expect(second.body.data.skipped.slice(1).map((s: { reason: string }) => s.reason)).toEqual(['limit']);
  expect((await as(agent, 'get', replies())).body.data).toHaveLength(200);

  const over = await create('One too many', 'x');
  expect(over.status).toBe(400);
  expect(over.body.error.message).toContain('200');
  expect((await as(owner, 'post', `/sites/${h.site.id}/shared-reply-imports`, { replies: [] })).status).toBe(400);
  expect((await as(owner, 'post', `/sites/${h.site.id}/shared-reply-imports`, { replies: batch(1000, 201) })).status).toBe(400);

  const audit = (await as(owner, 'get', `/sites/${h.site.id}/audit-log?limit=100`)).body.data as { action: string }[];
  expect(audit.filter((e) => e.action === 'shared_replies.imported')).toHaveLength(2);
  for (const r of (await as(owner, 'get', replies())).body.data) await as(owner, 'delete', `${replies()}/${r.id}`);
  expect((await as(owner, 'get', replies())).body.data).toEqual([]);
});

test('filled in for a conversation: the visitor’s display name, a fallback for an anonymous one, the agent’s and the site’s names', async () => {
  await create('Hi', 'Hello {visitor.name}!');
  await create('First', 'Hi {visitor.firstName|there}, {agent.name} of {site.name} here.');
  await create('Plain', 'Hi {visitor.firstName}.');
  const byTitle = async (who: { token: string }, conv: string) =>
    Object.fromEntries(((await filled(who, conv)).body.data as { title: string; text: string }[]).map((r) => [r.title, r.text]));

  const siteName = (await h.runtime.services.access.getSite(h.site.id)).name;
  // An anonymous visitor: its friendly name, unless a fallback is written.
  const anon = await conversation();
  const friendly = friendlyName(anon.visitorId);
  await withToken(h, agent, 'patch', '/me', { displayName: 'Anna' });
  expect(await byTitle(agent, anon.id)).toEqual({
    Hi: `Hello ${friendly}!`,
    First: `Hi there, Anna of ${siteName} here.`,
    Plain: `Hi ${friendly}.`,
  });

  // A visitor whose server vouched for its name: that name, its first word.
  const known = await conversation();
  await h.runtime.services.visitors.store.record(h.site.id, known.visitorId, { name: 'María José Pérez', verified: true }, clock);
  expect(await byTitle(owner, known.id)).toEqual({
    Hi: 'Hello María José Pérez!',
    First: `Hi María, owner of ${siteName} here.`, // the owner has no display name: the email's local part
    Plain: 'Hi María.',
  });

  // The site hides agents' names: {agent.name} is the site's name, as the window shows it.
  expect((await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: false })).status).toBe(200);
  expect((await byTitle(agent, known.id)).First).toBe(`Hi María, ${siteName} of ${siteName} here.`);
  await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: true });

  expect((await filled(agent, 'conv_00000000000000000000000000')).status).toBe(404);
  expect((await filled(agent, 'nope')).status).toBe(400);
  for (const r of (await as(owner, 'get', replies())).body.data) await as(owner, 'delete', `${replies()}/${r.id}`);
});

test('two owners adding at once with one place left: exactly one is added', async () => {
  const fill = Array.from({ length: 199 }, (_, i) => ({ title: `Fill ${i}`, body: 'x' }));
  expect((await as(owner, 'post', `/sites/${h.site.id}/shared-reply-imports`, { replies: fill })).body.data.imported).toHaveLength(199);
  const other = await memberWithToken(h, h.site.id, 'owner2@example.com', 'owner');
  const answers = await Promise.all([create('Race A', 'a'), create('Race B', 'b', other)]);
  expect(answers.map((r) => r.status).sort()).toEqual([201, 400]);
  expect((await as(owner, 'get', replies())).body.data).toHaveLength(200);
  for (const r of (await as(owner, 'get', replies())).body.data) await as(owner, 'delete', `${replies()}/${r.id}`);
});
