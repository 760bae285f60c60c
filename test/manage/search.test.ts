/**
 * The inbox's search (`q` on listInboxConversations, server/search/) and the list's filters
 * combined, over /manage/v1 on a real database: a message is found as soon as it is committed;
 * by the visitor's name, email and id and the conversation's id; by a note (members only); hostile
 * queries answer 200 or a clear 400; pages hold every match once, newest first; a deleted
 * visitor's conversations are found no more; another site's never.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from './helpers';
import { newId } from '../../server/platform/ids';

let h: Harness;
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };

beforeAll(async () => {
  h = await manageHarness();
  site = h.site.id;
  owner = { id: (await newMember(h, site, 'owner@example.com', 'owner')).id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: (await newMember(h, site, 'agent@example.com', 'agent')).id, cookie: (await signIn(h, 'agent@example.com')).cookie };
});
afterAll(() => h.close());

const inbox = (rest = '', s = site) => `${M}/sites/${s}/inbox/conversations${rest}`;
const get = (path: string, cookie = agent.cookie) => request(h.app).get(path).set('Cookie', cookie);
const post = (path: string, body: object = {}, cookie = agent.cookie) => request(h.app).post(path).set(SAME_ORIGIN).set('Cookie', cookie).send(body);
const find = (q: string, more = '', cookie = agent.cookie) => get(inbox(`?q=${encodeURIComponent(q)}${more}`), cookie);
const ids = (res: request.Response) => (res.body.data as { id: string }[]).map((c) => c.id);
let visitors = 0;
async function say(content: string, visitorId = `search-visitor-${++visitors}`) {
  const said = await h.visitorSay(site, visitorId, content);
  return { conversation: said.conversation.id as string, visitorId };
}

test('a message is found as soon as it is written, by any of its words, as word beginnings, whatever the case and accents', async () => {
  const { conversation } = await say('Where is my parcel? Ordered the Crème brûlée set');
  for (const q of ['parcel', 'PARCEL', 'parc', 'where parcel', 'creme brulee', 'ordered parcel']) {
    const res = await find(q);
    expect(res.status).toBe(200);
    expect(ids(res)).toContain(conversation);
  }
  expect(ids(await find('parcel nowhere'))).not.toContain(conversation);
  // Stopwords of InnoDB's default list are searchable words here.
  expect(ids(await find('where the'))).toContain(conversation);
});

test("by the visitor's name, email and id, and by the conversation's id", async () => {
  const { conversation, visitorId } = await say('hello');
  await h.runtime.services.visitors.context.updateDetails(site, visitorId, { name: 'Grace Hopper', email: 'grace.hopper@navy.example' });
  for (const q of ['Grace', 'hopper', 'grace.hopper@navy.example', 'navy.example', visitorId, conversation]) {
    expect({ q, ids: ids(await find(q)) }).toEqual({ q, ids: expect.arrayContaining([conversation]) });
  }
  // The name changed: the new one is found, the old one no more.
  await h.runtime.services.visitors.context.updateDetails(site, visitorId, { name: 'Ada Lovelace', email: 'ada@example.org' });
  expect(ids(await find('lovelace'))).toContain(conversation);
  expect(ids(await find('Grace'))).not.toContain(conversation);
});

test('by the friendly name a visitor without a name is shown by', async () => {
  const { conversation } = await say('hi there');
  const row = (await get(inbox(`/${conversation}`))).body.data;
  const { friendlyName } = await import('../../server/visitors/display-name');
  expect(ids(await find(friendlyName(row.visitorId)))).toContain(conversation);
});

test('by an internal note, for members; an edited note by its new words, a deleted one not at all', async () => {
  const { conversation } = await say('plain question');
  const note = await post(inbox(`/${conversation}/notes`), { content: 'escalated to zanzibarteam' });
  expect(note.status).toBe(201);
  expect(ids(await find('zanzibarteam'))).toEqual([conversation]);
  const noteId = note.body.data.id;
  expect(
    (
      await request(h.app)
        .patch(inbox(`/${conversation}/notes/${noteId}`))
        .set(SAME_ORIGIN)
        .set('Cookie', agent.cookie)
        .send({ content: 'handed to quokkadesk' })
    ).status,
  ).toBe(200);
  expect(ids(await find('zanzibarteam'))).toEqual([]);
  expect(ids(await find('quokkadesk'))).toEqual([conversation]);
  expect(
    (
      await request(h.app)
        .delete(inbox(`/${conversation}/notes/${noteId}`))
        .set(SAME_ORIGIN)
        .set('Cookie', agent.cookie)
    ).status,
  ).toBe(204);
  expect(ids(await find('quokkadesk'))).toEqual([]);
});

test('hostile and odd queries answer 200 or a clear 400, never 500', async () => {
  const queries = [
    '+-"*()~<>@',
    '"',
    "'",
    'a',
    'ab',
    '*',
    '"unclosed phrase',
    'order*',
    '+order -refund',
    'NEAR(order refund)',
    'order OR refund AND NOT x',
    "'; drop table conversations; --",
    '%_\\',
    '\u0000\u0001abc',
    '注文 заказ 😀 🙂🙂🙂',
    'Z̴̡̛a̷l̸g̶o̵ text',
    'x'.repeat(200),
    Array.from({ length: 60 }, (_, i) => `w${i}x`).join(' '),
    'conv_' + 'z'.repeat(26),
  ];
  for (const q of queries) {
    const res = await find(q);
    expect({ q, status: res.status }).toEqual({ q, status: res.status === 400 ? 400 : 200 });
    if (res.status === 400) {
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.message).toMatch(/q|word/);
    }
  }
  expect((await find('a')).status).toBe(400);
  expect((await find('+-"*()~<>@')).status).toBe(400);
  expect((await get(inbox('?q='))).status).toBe(400);
  expect((await find('x'.repeat(201))).status).toBe(400);
});

test('pages hold every match once, newest first, and the cursor is bound to the search', async () => {
  const made: string[] = [];
  for (let i = 0; i < 7; i++) made.push((await say(`pagingword number ${i}`)).conversation);
  await say('unrelated words');
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res: request.Response = await find('pagingword', `&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(res.status).toBe(200);
    seen.push(...ids(res));
    cursor = res.body.page.nextCursor;
    pages++;
  } while (cursor);
  expect(pages).toBe(3);
  expect(seen).toEqual([...made].reverse());
  const first = await find('pagingword', '&limit=3');
  const other = await find('number', `&limit=3&cursor=${encodeURIComponent(first.body.page.nextCursor)}`);
  expect(other.status).toBe(400);
});

test('the search combines with state, assignee, unread and tag', async () => {
  const a = (await say('combiword alpha')).conversation;
  const b = (await say('combiword beta')).conversation;
  const c = (await say('combiword gamma')).conversation;
  expect((await post(inbox(`/${a}/assignee`), { assigneeId: agent.id })).status).toBe(200);
  expect((await post(inbox(`/${b}/close`))).status).toBe(200);
  expect((await post(inbox(`/${c}/read`))).status).toBe(200);
  const tagId = `tag_${newId('note', Date.now()).slice('note_'.length)}`;
  await h.runtime.db('tags').insert({ id: tagId, site_id: site, name: 'VIP', name_key: 'vip', created_at: Date.now() });
  await h.runtime.db('conversation_tags').insert({ conversation_id: c, tag_id: tagId, site_id: site, created_at: Date.now() });

  expect(ids(await find('combiword'))).toEqual([c, b, a]);
  expect(ids(await find('combiword', '&state=open'))).toEqual([c, a]);
  expect(ids(await find('combiword', '&state=closed'))).toEqual([b]);
  expect(ids(await find('combiword', '&assignee=me'))).toEqual([a]);
  expect(ids(await find('combiword', '&assignee=unassigned&state=open'))).toEqual([c]);
  expect(ids(await find('combiword', '&unread=true'))).toEqual([b, a]);
  expect(ids(await find('combiword', `&tag=${tagId}`))).toEqual([c]);
  expect(ids(await find('combiword alpha', '&state=open'))).toEqual([a]);
  expect(ids(await get(inbox(`?tag=${tagId}`)))).toEqual([c]);
  expect(ids(await get(inbox(`?tag=${tagId}&state=closed`)))).toEqual([]);
  expect((await get(inbox('?tag=vip'))).status).toBe(400);
  // The owner's unread differs from the agent's: the owner read nothing.
  expect(ids(await find('combiword', '&unread=true', owner.cookie))).toEqual([c, b, a]);
});

test("a deleted visitor's conversations are found no more, and its entries are gone", async () => {
  const { conversation, visitorId } = await say('forgetmeword please', 'vis_forgetful_visitor');
  await h.runtime.services.visitors.context.updateDetails(site, visitorId, { name: 'Forget Me', email: 'forget@example.com' });
  await post(inbox(`/${conversation}/notes`), { content: 'forgetmeword in a note' });
  expect(ids(await find('forgetmeword'))).toEqual([conversation]);
  const res = await post(`${M}/sites/${site}/visitor-deletions`, { visitorId }, owner.cookie);
  expect(res.status).toBe(200);
  expect(res.body.data.removed.search).toBeGreaterThanOrEqual(3);
  for (const q of ['forgetmeword', 'forget@example.com', visitorId, conversation]) expect(ids(await find(q))).toEqual([]);
  expect(await h.runtime.db('search_entries').where('conversation_id', conversation).count({ n: '*' })).toEqual([{ n: 0 }]);
});

test('the migration indexes what was written before it: messages, notes and cards', async () => {
  const { conversation, visitorId } = await say('backfillword from before', 'vis_backfill_visitor');
  await h.runtime.services.visitors.context.updateDetails(site, visitorId, { name: 'Earlier Person' });
  await post(inbox(`/${conversation}/notes`), { content: 'notebackfill' });
  const m026 = await import('../../server/db/migrations/026_search');
  await m026.down(h.runtime.db);
  await m026.up(h.runtime.db);
  for (const q of ['backfillword', 'notebackfill', 'earlier person', 'vis_backfill_visitor', conversation]) expect(ids(await find(q))).toEqual([conversation]);
});

test("another site's conversations are never found", async () => {
  const other = await h.runtime.services.access.createSite('Other');
  await h.visitorSay(other.id, 'elsewhere', 'othersiteword');
  expect(ids(await find('othersiteword'))).toEqual([]);
});
