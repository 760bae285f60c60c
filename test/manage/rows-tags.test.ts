/**
 * Inbox rows that say what is waiting, and tags (issue 25, items 1 and 6), through /manage/v1: the
 * visitor's display name, the last message's preview and who wrote it ("You", another member's
 * name, "Integration"), since when the visitor waits, the last answer, the tags; a page of rows
 * costs the same statements whatever its rows hold. Tags: owners keep the list (limits, case-blind
 * names, 409, audit), members put them on conversations (idempotent, live `conversation.tagged`),
 * another site's tag or conversation is 404, and deleting a visitor's data takes its tags off.
 * The real app, response validation on, both engines.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { countStatements } from '../helpers/held-statements';
import { M, manageHarness, memberWithToken, withToken } from './helpers';
import { friendlyName } from '../../server/visitors/display-name';
import { TAG_LIMITS } from '../../server/tags/service';
import { migrationSource } from '../../server/db/migrations';

let h: Harness;
let clock = Date.UTC(2026, 10, 26, 9, 0, 0);
let siteB: { id: string };
let owner: { id: string; token: string };
let agent: { id: string; token: string };
let ownerB: { id: string; token: string };

type Method = Parameters<typeof withToken>[2];
const as = (who: { token: string }, method: Method, path: string, body?: object) => withToken(h, who, method, path, body);
const inbox = (path = '', siteId = h.site.id) => `/sites/${siteId}/inbox/conversations${path}`;
const tags = (path = '', siteId = h.site.id) => `/sites/${siteId}/tags${path}`;
let visitors = 0;
const newVisitor = () => `shopper-${++visitors}`;
const reply = async (who: { token: string }, id: string, content: string) =>
  expect((await as(who, 'post', inbox(`/${id}/messages`), { content, format: 'markdown' })).status).toBe(201);
const row = async (who: { token: string }, id: string) => (await as(who, 'get', inbox(`/${id}`))).body.data;

beforeAll(async () => {
  h = await manageHarness({ now: () => (clock += 1) });
  siteB = await h.newSite('Other site');
  owner = await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, h.site.id, 'agent@example.com', 'agent');
  ownerB = await memberWithToken(h, siteB.id, 'owner-b@example.com', 'owner');
  await as(agent, 'patch', '/me', { displayName: 'Anna' });
});
afterAll(() => h.close());

describe('rows', () => {
  test('a row names the visitor, previews the last message, says who answered and since when the visitor waits', async () => {
    const visitorId = newVisitor();
    const first = await h.visitorSay(h.site.id, visitorId, 'Hello,\n\n  my **order** is late');
    const id = first.conversation.id;
    let r = await row(owner, id);
    expect(r).toMatchObject({
      visitorName: friendlyName(visitorId),
      visitorNameSource: 'generated',
      lastMessage: { preview: 'Hello, my **order** is late', direction: 'incoming', authorId: null, author: null, attachmentCount: 0 },
      waitingSince: first.message.createdAt,
      lastAnswer: null,
      tags: [],
    });
    // A second message does not restart the wait: the oldest unanswered one counts.
    await h.visitorSay(h.site.id, visitorId, 'Anyone?');
    expect((await row(owner, id)).waitingSince).toBe(first.message.createdAt);

    await reply(agent, id, 'See [the tracking page](https://example.com/t) — `ORD-1`');
    r = await row(owner, id);
    expect(r.lastMessage).toMatchObject({ preview: 'See the tracking page — ORD-1', direction: 'outgoing', authorId: agent.id, author: 'Anna' });
    expect(r.waitingSince).toBeNull();
    expect(r.lastAnswer).toMatchObject({ authorId: agent.id, author: 'Anna' });
    // The same row read by its author says "You".
    expect((await row(agent, id)).lastMessage.author).toBe('You');
    expect((await row(agent, id)).lastAnswer.author).toBe('You');

    // An integration's answer (the public API) has no member behind it.
    const api = await request(h.app)
      .post(`/api/v1/conversations/${id}/messages`)
      .set('Authorization', `Bearer ${h.site.key}`)
      .send({ content: 'Automated: shipped' });
    expect(api.status).toBe(201);
    r = await row(owner, id);
    expect(r.lastMessage).toMatchObject({ preview: 'Automated: shipped', author: 'Integration', authorId: null });
    expect(r.lastAnswer.author).toBe('Integration');

    // The visitor writes again: a new wait starts at that message.
    const again = await h.visitorSay(h.site.id, visitorId, 'Thanks!');
    r = await row(owner, id);
    expect(r.waitingSince).toBe(again.message.createdAt);
    expect(r.lastAnswer.at).toBe(api.body.data.createdAt);
    // The list says the same as the single read.
    const listed = (await as(owner, 'get', inbox('?limit=100'))).body.data.find((c: { id: string }) => c.id === id);
    expect(listed).toEqual(r);
  });

  test('a message of files alone is previewed by their names', async () => {
    const id = (await h.visitorSay(h.site.id, newVisitor(), 'Here')).conversation.id;
    const sent = await request(h.app)
      .post(`${M}${inbox(`/${id}/messages`)}`)
      .set('Authorization', `Bearer ${owner.token}`)
      .field('content', '')
      .attach('file', Buffer.from('a'), { filename: 'invoice.pdf', contentType: 'application/pdf' })
      .attach('file', Buffer.from('b'), { filename: 'label.pdf', contentType: 'application/pdf' });
    expect(sent.status).toBe(201);
    expect((await row(owner, id)).lastMessage).toMatchObject({ preview: 'invoice.pdf and 1 more file', attachmentCount: 2, author: 'You' });
  });

  test('a page given name shows as unverified, a verified one as verified', async () => {
    const unverified = newVisitor();
    const verified = newVisitor();
    const a = (await h.visitorSay(h.site.id, unverified, 'hi')).conversation.id;
    const b = (await h.visitorSay(h.site.id, verified, 'hi')).conversation.id;
    await h.runtime.services.visitors.store.record(h.site.id, unverified, { name: 'Maria', verified: false }, clock);
    await h.runtime.services.visitors.store.record(h.site.id, verified, { name: 'Maria Verified', verified: true }, clock);
    expect(await row(owner, a)).toMatchObject({ visitorName: 'Maria', visitorNameSource: 'unverified' });
    expect(await row(owner, b)).toMatchObject({ visitorName: 'Maria Verified', visitorNameSource: 'verified' });
  });

  test('a page of rows costs the same statements whatever its rows hold', async () => {
    const statements = (run: () => Promise<unknown>) => countStatements(h.runtime.db, run);
    const site = await h.newSite('Counted');
    const member = await memberWithToken(h, site.id, 'counted@example.com', 'owner');
    const third = await memberWithToken(h, site.id, 'third@example.com', 'agent');
    const tag = (await as(member, 'post', tags('', site.id), { name: 'Counted' })).body.data.id;
    const page = () => statements(() => as(member, 'get', `/sites/${site.id}/inbox/conversations?limit=100`));
    const say = (visitorId: string, content: string) => h.visitorSay(site.id, visitorId, content);
    /** A conversation with a named visitor, answers by two members, a tag and unread messages. */
    const rich = async (i: number) => {
      const id = (await say(`rich-${i}`, `hello ${i}`)).conversation.id;
      await h.runtime.services.visitors.store.record(site.id, `rich-${i}`, { name: `Person ${i}`, verified: i % 2 === 0 }, clock);
      for (const who of [member, third]) {
        const r = await as(who, 'post', `/sites/${site.id}/inbox/conversations/${id}/messages`, { content: `answer ${i}` });
        expect(r.status).toBe(201);
      }
      await say(`rich-${i}`, 'more');
      expect((await as(third, 'put', `/sites/${site.id}/inbox/conversations/${id}/tags/${tag}`)).status).toBe(200);
    };
    await rich(0);
    await page(); // the token's first use of the minute is written; the pages compared below are not
    const one = await page();
    for (let i = 1; i < 12; i++) await rich(i);
    await say('plain', 'no name, no answer, no tag');
    expect(await page()).toBe(one);
  });
});

describe('migration 027', () => {
  test("fills existing conversations' rows as their messages would have", async () => {
    const answered = (await h.visitorSay(h.site.id, newVisitor(), 'first')).conversation.id;
    await reply(agent, answered, '# Done, *thanks*');
    const waiting = newVisitor();
    const waitingId = (await h.visitorSay(h.site.id, waiting, 'one')).conversation.id;
    await reply(owner, waitingId, 'ok');
    await h.visitorSay(h.site.id, waiting, 'two');
    await h.visitorSay(h.site.id, waiting, 'three');
    const before = [await row(owner, answered), await row(owner, waitingId)];
    const db = h.runtime.db;
    await db.migrate.down({ migrationSource, name: '027_rows' });
    expect(await db.schema.hasColumn('conversations', 'waiting_since')).toBe(false);
    await db.migrate.latest({ migrationSource });
    expect([await row(owner, answered), await row(owner, waitingId)]).toEqual(before);
    expect(before[0].lastMessage.preview).toBe('Done, thanks');
  });
});

describe('tags', () => {
  test('an owner adds, renames and deletes tags; every member lists them by name; each change audited', async () => {
    const made = await as(owner, 'post', tags(), { name: '  Billing  ' });
    expect(made.status).toBe(201);
    expect(made.body.data).toEqual({ id: expect.stringMatching(/^tag_[0-9a-hjkmnp-tv-z]{26}$/), name: 'Billing', createdAt: expect.any(String) });
    const id = made.body.data.id;
    expect((await as(owner, 'post', tags(), { name: 'bug' })).status).toBe(201);
    expect((await as(agent, 'get', tags())).body.data.map((t: { name: string }) => t.name)).toEqual(['Billing', 'bug']);
    // Unique without regard to case: a clash is 409, on create and on rename.
    expect((await as(owner, 'post', tags(), { name: 'BILLING' })).body.error.code).toBe('conflict');
    expect((await as(owner, 'patch', tags(`/${id}`), { name: 'BUG' })).status).toBe(409);
    const renamed = await as(owner, 'patch', tags(`/${id}`), { name: 'Invoices' });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data.name).toBe('Invoices');
    // Renaming to its own name in another case is no clash.
    expect((await as(owner, 'patch', tags(`/${id}`), { name: 'invoices' })).status).toBe(200);
    expect((await as(owner, 'delete', tags(`/${id}`))).status).toBe(204);
    expect((await as(owner, 'delete', tags(`/${id}`))).status).toBe(404);
    const audit = (await as(owner, 'get', `/sites/${h.site.id}/audit-log?limit=100`)).body.data as { action: string; objectId: string }[];
    expect(audit.filter((e) => e.objectId === id).map((e) => e.action)).toEqual(expect.arrayContaining(['tag.created', 'tag.renamed', 'tag.deleted']));
  });

  test('agents cannot keep the list; bad names are 400; another site is 404', async () => {
    expect((await as(agent, 'post', tags(), { name: 'x' })).status).toBe(403);
    const theirs = (await as(ownerB, 'post', tags('', siteB.id), { name: 'Theirs' })).body.data.id;
    expect((await as(agent, 'patch', tags(`/${theirs}`), { name: 'y' })).status).toBe(403);
    expect((await as(owner, 'patch', tags(`/${theirs}`), { name: 'y' })).status).toBe(404);
    expect((await as(owner, 'delete', tags(`/${theirs}`))).status).toBe(404);
    expect((await as(owner, 'get', tags('', siteB.id))).status).toBe(404);
    for (const name of ['', '   ', 'x'.repeat(51), 'two\nlines', 'tab\there']) expect((await as(owner, 'post', tags(), { name })).status).toBe(400);
    expect((await as(owner, 'post', tags(), { name: 'x', extra: 1 })).status).toBe(400);
    expect((await as(owner, 'post', tags(), { name: 'x'.repeat(50) })).status).toBe(201);
  });

  test('members put tags on conversations and take them off; the row and the live feed follow; limits hold', async () => {
    const id = (await h.visitorSay(h.site.id, newVisitor(), 'tag me')).conversation.id;
    const a = (await as(owner, 'post', tags(), { name: 'Urgent' })).body.data;
    const b = (await as(owner, 'post', tags(), { name: 'Angry' })).body.data;
    const on = (tagId: string, who = agent) => as(who, 'put', inbox(`/${id}/tags/${tagId}`));
    const off = (tagId: string, who = agent) => as(who, 'delete', inbox(`/${id}/tags/${tagId}`));
    const feedTail = async () => h.runtime.db('inbox_activity').where({ site_id: h.site.id, kind: 'conversation.tagged' }).count({ n: '*' }).first();
    const before = Number((await feedTail())!.n);
    expect((await on(a.id)).body.data).toEqual([{ id: a.id, name: 'Urgent' }]);
    expect((await on(b.id)).body.data).toEqual([
      { id: b.id, name: 'Angry' },
      { id: a.id, name: 'Urgent' },
    ]);
    // Again: nothing changes, nothing recorded.
    expect((await on(a.id)).status).toBe(200);
    expect(Number((await feedTail())!.n)).toBe(before + 2);
    expect((await row(owner, id)).tags.map((t: { name: string }) => t.name)).toEqual(['Angry', 'Urgent']);
    const event = await h.runtime.db('inbox_activity').where({ site_id: h.site.id, kind: 'conversation.tagged' }).orderBy('position', 'desc').first();
    expect(JSON.parse(event.body)).toEqual({
      conversationId: id,
      tags: [
        { id: b.id, name: 'Angry' },
        { id: a.id, name: 'Urgent' },
      ],
      by: agent.id,
    });
    // A rename shows on the row.
    await as(owner, 'patch', tags(`/${a.id}`), { name: 'Very urgent' });
    expect((await row(agent, id)).tags.map((t: { name: string }) => t.name)).toEqual(['Angry', 'Very urgent']);
    expect((await off(b.id)).body.data).toEqual([{ id: a.id, name: 'Very urgent' }]);
    expect((await off(b.id)).status).toBe(200);
    // Deleting a tag takes it off.
    await as(owner, 'delete', tags(`/${a.id}`));
    expect((await row(agent, id)).tags).toEqual([]);
    // Another site's tag, an unknown conversation: 404.
    const theirs = (await as(ownerB, 'post', tags('', siteB.id), { name: 'Foreign' })).body.data.id;
    expect((await on(theirs)).status).toBe(404);
    expect((await as(agent, 'put', inbox(`/conv_01jd8x3r5k0000000000000000/tags/${b.id}`))).status).toBe(404);
    expect((await as(ownerB, 'put', `/sites/${siteB.id}/inbox/conversations/${id}/tags/${theirs}`)).status).toBe(404);
    expect((await as(agent, 'put', inbox(`/${id}/tags/not-a-tag`))).status).toBe(400);
    // At most TAG_LIMITS.perConversation on one conversation.
    const many = [];
    for (let i = 0; i <= TAG_LIMITS.perConversation; i++) many.push((await as(owner, 'post', tags(), { name: `many ${i}` })).body.data.id);
    for (const t of many.slice(0, TAG_LIMITS.perConversation)) expect((await on(t)).status).toBe(200);
    expect((await on(many[TAG_LIMITS.perConversation])).status).toBe(400);
    const audit = (await as(owner, 'get', `/sites/${h.site.id}/audit-log?limit=100`)).body.data as { action: string; objectId: string }[];
    expect(audit.filter((e) => e.objectId === id).map((e) => e.action)).toEqual(expect.arrayContaining(['conversation.tagged', 'conversation.untagged']));
  });

  test('a site keeps at most the limit of tags', async () => {
    const site = await h.newSite('Full');
    const o = await memberWithToken(h, site.id, 'full@example.com', 'owner');
    const rows = Array.from({ length: TAG_LIMITS.perSite }, (_, i) => ({
      id: `tag_${String(i).padStart(26, '0')}`,
      site_id: site.id,
      name: `t${i}`,
      name_key: `t${i}`,
      created_at: clock,
    }));
    await h.runtime.db.batchInsert('tags', rows, 100);
    const over = await as(o, 'post', tags('', site.id), { name: 'one more' });
    expect(over.status).toBe(400);
    expect(over.body.error.message).toMatch(/at most 200/);
  });

  test("deleting a visitor's data takes the tags off its conversations", async () => {
    const visitorId = newVisitor();
    const id = (await h.visitorSay(h.site.id, visitorId, 'forget me')).conversation.id;
    const t = (await as(owner, 'post', tags(), { name: 'Privacy' })).body.data.id;
    await as(agent, 'put', inbox(`/${id}/tags/${t}`));
    const deleted = await as(owner, 'post', `/sites/${h.site.id}/visitor-deletions`, { visitorId });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data.removed.tags).toBe(1);
    expect(await h.runtime.db('conversation_tags').where({ conversation_id: id })).toEqual([]);
    expect((await as(owner, 'get', tags())).body.data.map((x: { id: string }) => x.id)).toContain(t);
  });
});
