/**
 * The inbox over /manage/v1: filters (state, assignee, unread), paging at depth, reply as a member
 * (authorId, origin messenger, message.created, the chat window's feed), close, assign, read marks,
 * audit entries, roles, another site's 404, and CSRF on the changes.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { bearer } from '../helpers/harness';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from './helpers';
import { webhooks } from '../webhooks/helpers';

let h: Harness;
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
let agent2: { id: string; cookie: string };

beforeAll(async () => {
  h = await manageHarness();
  site = h.site.id;
  const o = await newMember(h, site, 'owner@example.com', 'owner');
  const a = await newMember(h, site, 'agent@example.com', 'agent');
  const a2 = await newMember(h, site, 'agent2@example.com', 'agent');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  agent2 = { id: a2.id, cookie: (await signIn(h, 'agent2@example.com')).cookie };
});
afterAll(async () => {
  await h.close();
});

const inbox = (rest = '', s = site) => `${M}/sites/${s}/inbox/conversations${rest}`;
const get = (path: string, cookie: string) => request(h.app).get(path).set('Cookie', cookie);
const post = (path: string, cookie: string, body: object = {}) => request(h.app).post(path).set(SAME_ORIGIN).set('Cookie', cookie).send(body);
let visitors = 0;
async function newConversation(content = 'hello') {
  const said = await h.visitorSay(site, `visitor-${++visitors}`, content);
  return said.conversation.id as string;
}
const ids = (res: request.Response) => (res.body.data as { id: string }[]).map((c) => c.id);

describe('reading the inbox', () => {
  test('an agent lists conversations with their assignee and unread count', async () => {
    const conv = await newConversation('where is my order?');
    const res = await get(inbox(), agent.cookie);
    expect(res.status).toBe(200);
    const item = res.body.data.find((c: { id: string }) => c.id === conv);
    expect(item).toMatchObject({ id: conv, state: 'open', assigneeId: null, unreadCount: 1, lastReadAt: null });
  });

  test('a page is three statements however many it shows: the session with its membership, the page with assignees, marks, visitors and row summaries, the unread counts with the tags', async () => {
    const [assigned, read, plain] = [await newConversation('assigned'), await newConversation('read'), await newConversation('plain')];
    expect((await post(inbox(`/${assigned}/assignee`), agent.cookie, { assigneeId: agent.id })).status).toBe(200);
    expect((await post(inbox(`/${read}/read`), agent.cookie)).status).toBe(200);
    await h.visitorSay(site, `visitor-${visitors - 1}`, 'after the mark');
    await get(inbox(), agent.cookie); // a session seen a moment ago is not touched again
    const sent: string[] = [];
    const listener = (q: { sql: string }) => sent.push(q.sql);
    h.runtime.db.on('query', listener);
    let res: request.Response;
    try {
      res = await get(inbox('?limit=25'), agent.cookie);
    } finally {
      h.runtime.db.off('query', listener);
    }
    expect(res.status).toBe(200);
    // No member wrote here, so the members' names (rows-tags.test.ts counts that one too) are not read.
    expect(sent).toHaveLength(3);
    expect(sent[0]).toMatch(/from [`"]sessions[`"] .*left join [`"]memberships[`"]/);
    const byId = new Map((res.body.data as { id: string }[]).map((c) => [c.id, c]));
    expect(res.body.data.length).toBeGreaterThanOrEqual(3);
    expect(byId.get(assigned)).toMatchObject({ assigneeId: agent.id, unreadCount: 1, lastReadAt: null });
    expect(byId.get(read)).toMatchObject({ assigneeId: null, unreadCount: 1, lastReadAt: expect.any(String) });
    expect(byId.get(plain)).toMatchObject({ assigneeId: null, unreadCount: 1, lastReadAt: null });
  });

  test('one conversation and its messages', async () => {
    const conv = await newConversation('one');
    await h.visitorSay(site, `visitor-${visitors}`, 'two');
    const one = await get(inbox(`/${conv}`), agent.cookie);
    expect(one.status).toBe(200);
    expect(one.body.data).toMatchObject({ id: conv, unreadCount: 2 });
    const page = await get(inbox(`/${conv}/messages?limit=1`), agent.cookie);
    expect(page.status).toBe(200);
    expect(page.body.data.map((m: { content: string }) => m.content)).toEqual(['one']);
    const next = await get(inbox(`/${conv}/messages?limit=1&cursor=${page.body.page.nextCursor}`), agent.cookie);
    expect(next.body.data.map((m: { content: string }) => m.content)).toEqual(['two']);
  });

  test('another site, or its conversation, is 404; so is a site one is not a member of', async () => {
    const other = await h.newSite('Other');
    const theirs = (await h.visitorSay(other.id, 'v-other', 'hi')).conversation.id;
    expect((await get(inbox('', other.id), owner.cookie)).status).toBe(404);
    expect((await get(inbox(`/${theirs}`), owner.cookie)).status).toBe(404);
    expect((await get(inbox(`/${theirs}/messages`), owner.cookie)).status).toBe(404);
    expect((await post(inbox(`/${theirs}/close`), owner.cookie)).status).toBe(404);
    expect((await post(inbox(`/${theirs}/read`), owner.cookie)).status).toBe(404);
    expect((await post(inbox(`/${theirs}/assignee`), owner.cookie, { assigneeId: null })).status).toBe(404);
    expect((await post(inbox(`/${theirs}/messages`), owner.cookie, { content: 'x' })).status).toBe(404);
    expect((await h.runtime.db('messages').where({ conversation_id: theirs })).length).toBe(1);
  });
});

describe('replying', () => {
  test('a reply is origin messenger with authorId, in the public API, in message.created and in the window feed', async () => {
    const conv = await newConversation('help please');
    const res = await post(inbox(`/${conv}/messages`), agent.cookie, { content: 'On it!', format: 'markdown' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      conversationId: conv,
      direction: 'outgoing',
      origin: 'messenger',
      apiKeyId: null,
      authorId: agent.id,
      content: 'On it!',
      format: 'markdown',
    });
    const pub = await request(h.app).get(`/api/v1/conversations/${conv}/messages`).set(bearer(h.site.key));
    expect(pub.body.data.find((m: { id: string }) => m.id === res.body.data.id)).toMatchObject({ authorId: agent.id, origin: 'messenger' });
    expect(pub.body.data[0].authorId).toBeNull(); // the visitor's
    const events = (await h.runtime.db('events').where({ site_id: site, name: 'message.created' })).map((e) => JSON.parse(e.body));
    expect(events.find((e) => e.data.message.id === res.body.data.id).data.message).toMatchObject({ authorId: agent.id, origin: 'messenger' });
    const feed = await h.runtime.services.window.feed.read(site, `visitor-${visitors}`, { kind: 'start' }, 10);
    const seen = feed.events.filter((e) => e.event === 'message').map((e) => (e.data as { message: Record<string, unknown> }).message);
    expect(seen.map((m) => m.content)).toEqual(['help please', 'On it!']);
    expect(seen[1]).not.toHaveProperty('authorId'); // the window sees no account ids
    // Replying reads the conversation for the member.
    expect((await get(inbox(`/${conv}`), agent.cookie)).body.data.unreadCount).toBe(0);
    expect((await get(inbox(`/${conv}`), owner.cookie)).body.data.unreadCount).toBe(2);
  });

  test("a reply's delivery goes to the site's event address, read with the conversation's lock and not on its own", async () => {
    const other = (await h.newSite('inbox address')).id;
    await newMember(h, other, 'address-agent@example.com', 'agent');
    const cookie = (await signIn(h, 'address-agent@example.com')).cookie;
    const endpoint = await webhooks(h).setEndpoint(other, 'https://localhost:9/inbox-address', 'message.created');
    const conv = (await h.visitorSay(other, 'visitor-address', 'hello')).conversation.id;
    const seen: string[] = [];
    const listener = (q: { sql: string }) => seen.push(q.sql);
    h.runtime.db.on('query', listener);
    let res;
    try {
      res = await post(inbox(`/${conv}/messages`, other), cookie, { content: 'answered' });
    } finally {
      h.runtime.db.off('query', listener);
    }
    expect(res.status).toBe(201);
    const deliveries = await h.runtime
      .db('deliveries')
      .join('events', 'events.id', 'deliveries.event_id')
      .where('events.message_id', res.body.data.id)
      .select('deliveries.endpoint_id');
    expect(deliveries).toEqual([{ endpoint_id: endpoint.id }]);
    expect(seen.filter((sql) => /[`"]webhook_endpoints[`"]/.test(sql))).toEqual([]);
  });

  test('a reply with files (multipart) and Idempotency-Key replays', async () => {
    const conv = await newConversation();
    const send = () =>
      request(h.app)
        .post(inbox(`/${conv}/messages`))
        .set(SAME_ORIGIN)
        .set('Cookie', owner.cookie)
        .set('Idempotency-Key', 'inbox-key-1')
        .field('content', 'see attached')
        .attach('file', Buffer.from('hello file'), { filename: 'note.txt', contentType: 'text/plain' });
    const first = await send();
    expect(first.status).toBe(201);
    expect(first.body.data.attachments).toHaveLength(1);
    expect(first.body.data.authorId).toBe(owner.id);
    const again = await send();
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    expect((await h.runtime.db('messages').where({ conversation_id: conv, origin: 'messenger' })).length).toBe(1);
  });

  test('a closed conversation takes no reply (409)', async () => {
    const conv = await newConversation();
    expect((await post(inbox(`/${conv}/close`), agent.cookie)).status).toBe(200);
    const res = await post(inbox(`/${conv}/messages`), agent.cookie, { content: 'late' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conversation_closed');
  });
});

describe('close, assign, read', () => {
  test('close emits one conversation.closed and one audit entry with actor and client address', async () => {
    const conv = await newConversation();
    const res = await post(inbox(`/${conv}/close`), agent.cookie);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: conv, state: 'closed' });
    expect((await post(inbox(`/${conv}/close`), agent.cookie)).status).toBe(200);
    expect((await h.runtime.db('events').where({ site_id: site, name: 'conversation.closed' }).andWhere('body', 'like', `%${conv}%`)).length).toBe(1);
    const audit = await h.runtime.db('audit_log').where({ site_id: site, action: 'conversation.closed', object_id: conv });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor_account_id: agent.id });
    expect(audit[0].client_ip).toBeTruthy();
  });

  test('assignment rules: owners assign anyone, an agent only themselves; audited; not a public event', async () => {
    const conv = await newConversation();
    const eventsBefore = Number((await h.runtime.db('events').where({ site_id: site }).count({ n: '*' }).first())!.n);
    const toAgent2 = await post(inbox(`/${conv}/assignee`), agent.cookie, { assigneeId: agent2.id });
    expect(toAgent2.status).toBe(403);
    expect(toAgent2.body.error.code).toBe('forbidden');
    const self = await post(inbox(`/${conv}/assignee`), agent.cookie, { assigneeId: agent.id });
    expect(self.status).toBe(200);
    expect(self.body.data.assigneeId).toBe(agent.id);
    expect((await post(inbox(`/${conv}/assignee`), agent2.cookie, { assigneeId: null })).status).toBe(403); // not theirs
    const byOwner = await post(inbox(`/${conv}/assignee`), owner.cookie, { assigneeId: agent2.id });
    expect(byOwner.body.data.assigneeId).toBe(agent2.id);
    expect((await post(inbox(`/${conv}/assignee`), agent2.cookie, { assigneeId: null })).body.data.assigneeId).toBeNull();
    const stranger = await post(inbox(`/${conv}/assignee`), owner.cookie, { assigneeId: 'usr_00000000000000000000000000' });
    expect(stranger.status).toBe(400);
    const audit = await h.runtime.db('audit_log').where({ site_id: site, object_id: conv }).orderBy('id');
    expect(audit.map((a) => [a.action, a.actor_account_id])).toEqual([
      ['conversation.assigned', agent.id],
      ['conversation.assigned', owner.id],
      ['conversation.unassigned', agent2.id],
    ]);
    expect(Number((await h.runtime.db('events').where({ site_id: site }).count({ n: '*' }).first())!.n)).toBe(eventsBefore);
  });

  test('mark read clears unread for that member only', async () => {
    const conv = await newConversation('a');
    await h.visitorSay(site, `visitor-${visitors}`, 'b');
    const read = await post(inbox(`/${conv}/read`), agent.cookie);
    expect(read.status).toBe(200);
    expect(read.body.data).toMatchObject({ conversationId: conv, accountId: agent.id });
    expect((await get(inbox(`/${conv}`), agent.cookie)).body.data.unreadCount).toBe(0);
    expect((await get(inbox(`/${conv}`), owner.cookie)).body.data.unreadCount).toBe(2);
    await h.visitorSay(site, `visitor-${visitors}`, 'c');
    expect((await get(inbox(`/${conv}`), agent.cookie)).body.data.unreadCount).toBe(1);
  });

  test('the same member marking one conversation read from several tabs at once: every answer is the mark', async () => {
    const conv = await newConversation('tabs');
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(inbox(`/${conv}/read`), agent2.cookie)));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    const newest = (await get(inbox(`/${conv}/messages?order=desc&limit=1`), agent2.cookie)).body.data[0];
    for (const r of answers) expect(r.body.data).toMatchObject({ conversationId: conv, accountId: agent2.id, lastReadMessageId: newest.id });
    expect((await get(inbox(`/${conv}`), agent2.cookie)).body.data.unreadCount).toBe(0);
  });
});

describe('filters and paging', () => {
  let s: string;
  let conv: string[];
  let o: { id: string; cookie: string };
  beforeAll(async () => {
    const made = await h.newSite('Filters');
    s = made.id;
    const acc = await newMember(h, s, 'filters-owner@example.com', 'owner');
    o = { id: acc.id, cookie: (await signIn(h, 'filters-owner@example.com')).cookie };
    conv = [];
    for (let i = 0; i < 12; i++) conv.push((await h.visitorSay(s, `fv-${i}`, `m${i}`)).conversation.id);
    // 0..3 assigned to the owner, 4..5 read by the owner, 6 closed.
    for (const c of conv.slice(0, 4)) await post(inbox(`/${c}/assignee`, s), o.cookie, { assigneeId: o.id });
    for (const c of conv.slice(4, 6)) await post(inbox(`/${c}/read`, s), o.cookie);
    await post(inbox(`/${conv[6]}/close`, s), o.cookie);
  });
  const list = async (query: string) => {
    const all: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await get(`${inbox('', s)}?limit=5&${query}${cursor ? `&cursor=${cursor}` : ''}`, o.cookie);
      expect(res.status).toBe(200);
      all.push(...ids(res));
      cursor = res.body.page.nextCursor;
    } while (cursor);
    return all;
  };
  const newestFirst = (xs: string[]) => [...xs].reverse();

  test('assignee me / unassigned / any', async () => {
    expect(await list('assignee=me')).toEqual(newestFirst(conv.slice(0, 4)));
    expect(await list('assignee=unassigned')).toEqual(newestFirst(conv.slice(4)));
    expect(await list('assignee=any')).toEqual(newestFirst(conv));
  });

  test('unread, state, and combined with assignee', async () => {
    expect(await list('unread=true')).toEqual(newestFirst(conv.filter((_, i) => i !== 4 && i !== 5)));
    expect(await list('state=closed')).toEqual([conv[6]]);
    expect(await list('state=open&assignee=unassigned&unread=true')).toEqual(newestFirst(conv.slice(7)));
    expect(await list('unread=false')).toEqual(newestFirst(conv));
  });

  test('time filters', async () => {
    const at = async (c: string) => Date.parse((await get(inbox(`/${c}`, s), o.cookie)).body.data.createdAt);
    const sixth = await at(conv[6]);
    const times = await Promise.all(conv.map(at));
    const iso = encodeURIComponent(new Date(sixth).toISOString());
    expect(await list(`createdBefore=${iso}`)).toEqual(newestFirst(conv.filter((_, i) => times[i] < sixth)));
    expect(await list(`createdAfter=${iso}&assignee=unassigned`)).toEqual(newestFirst(conv.filter((_, i) => times[i] >= sixth && i >= 4)));
  });

  test('a cursor is bound to its filters', async () => {
    const first = await get(`${inbox('', s)}?limit=2&assignee=me`, o.cookie);
    const other = await get(`${inbox('', s)}?limit=2&assignee=unassigned&cursor=${first.body.page.nextCursor}`, o.cookie);
    expect(other.status).toBe(400);
  });
});

describe('roles and CSRF', () => {
  test('a change by session cookie from another site is refused; a management token is not checked', async () => {
    const conv = await newConversation();
    for (const [path, body] of [
      [`/${conv}/messages`, { content: 'x' }],
      [`/${conv}/close`, {}],
      [`/${conv}/assignee`, { assigneeId: null }],
      [`/${conv}/read`, {}],
    ] as const) {
      const res = await request(h.app).post(inbox(path)).set('Sec-Fetch-Site', 'cross-site').set('Cookie', owner.cookie).send(body);
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('cross_site_request');
    }
    expect((await h.runtime.db('messages').where({ conversation_id: conv })).length).toBe(1);
    const token = (await request(h.app).post(`${M}/tokens`).set(SAME_ORIGIN).set('Cookie', owner.cookie).send({ label: 'inbox' })).body.data.token;
    const res = await request(h.app)
      .post(inbox(`/${conv}/messages`))
      .set('Authorization', `Bearer ${token}`)
      .send({ content: 'from a script' });
    expect(res.status).toBe(201);
    expect(res.body.data.authorId).toBe(owner.id);
  });
});

describe('the inbox feed', () => {
  test('maintenance keeps a week of it', async () => {
    await newConversation('kept a week');
    const db = h.runtime.db;
    const count = async () => Number((await db('inbox_activity').where({ site_id: site }).count({ n: '*' }).first())!.n);
    const before = await count();
    expect(before).toBeGreaterThan(0);
    expect(Number(await h.runtime.services.inbox.service.purge(Date.now() + 6 * 24 * 3600_000))).toBe(0);
    expect(Number(await h.runtime.services.inbox.service.purge(Date.now() + 8 * 24 * 3600_000))).toBeGreaterThanOrEqual(before);
    expect(await count()).toBe(0);
    // The position counter stays: a stream that resumes goes on from the newest position, never reusing one.
    expect(await h.runtime.services.inbox.service.purge()).toBe(0);
    expect(Number((await db('inbox_positions').where({ site_id: site }).first()).position)).toBeGreaterThanOrEqual(before);
  });
});
