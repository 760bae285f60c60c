/**
 * Internal notes over /manage/v1 (issue 25, item 5): writing, reading page by page, editing and
 * deleting by the rules (author, owner, the 24-hour edit window), mentions, bad input, another
 * site's 404, the live stream, the timeline, and the structural rule: a note never reaches the
 * visitor side. Checked from outside, where a visitor or an integration would look: the chat
 * window's conversation, messages, poll and live stream, `/api/v1` (messages, the card's
 * `updatedAt`), the events delivered to the event address, and the members' unread counts.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { bearer, listenHttps } from '../helpers/harness';
import { allowOrigins, auth, getToken, openSse, ORIGIN, SseStream, w } from '../window/helpers';
import { deliveryEnv, Receiver, startReceiver, workerPool } from '../webhooks/helpers';
import { waitFor } from '../helpers/wait';
import { holdStatements } from '../helpers/held-statements';
import { M, manageHarness, memberWithToken, newMember, SAME_ORIGIN, signIn } from './helpers';

/** A liveness bound far above the milliseconds a change takes to reach a stream (the channel wakes it at once). */
const ARRIVAL_MS = 10_000;

let h: Harness;
let receiver: Receiver;
let server: { url: string; ca: string; close(): Promise<void> };
let site: string;
/** Moves the service's clock (the 24-hour edit window) without waiting. */
let clockOffset = 0;
let owner: { id: string; token: string };
let agent: { id: string; token: string };
let agent2: { id: string; token: string };
const streams: SseStream[] = [];
const workers = workerPool(() => h);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await manageHarness({ env: { ...deliveryEnv(receiver), RATE_LIMIT_PER_MINUTE: '100000' }, now: () => Date.now() + clockOffset });
  site = h.site.id;
  await allowOrigins(h, site);
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, site, 'agent@example.com', 'agent');
  agent2 = await memberWithToken(h, site, 'agent2@example.com', 'agent');
  // The owner chose a display name (migration 018's column); the agents are called by their email's local part.
  await h.runtime.db('accounts').where({ id: owner.id }).update({ display_name: 'Olga Owner' });
  server = await listenHttps(h.app);
}, 60_000);
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  await workers.stopAll();
  clockOffset = 0;
});
afterAll(async () => {
  await server?.close();
  await h?.close();
  await receiver?.close();
});

const conv = (id: string, rest = '', s = site) => `/sites/${s}/inbox/conversations/${id}${rest}`;
const as = (who: { token: string }, method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: object) => {
  const r = request(h.app)[method](`${M}${path}`).set('Authorization', `Bearer ${who.token}`);
  return body ? r.send(body) : r;
};
let visitors = 0;
async function newConversation(content = 'hello') {
  const visitor = `notes-visitor-${++visitors}`;
  const said = await h.visitorSay(site, visitor, content);
  return { id: said.conversation.id as string, visitor };
}
const write = (who: { token: string }, id: string, content: string, format?: 'plain' | 'markdown') =>
  as(who, 'post', conv(id, '/notes'), format ? { content, format } : { content });

describe('writing and reading notes', () => {
  test('a member writes a note: its author by name, markdown kept, mentions named; the conversation is unchanged', async () => {
    const c = await newConversation();
    const before = (await as(agent, 'get', conv(c.id))).body.data;
    const res = await write(agent, c.id, 'Refund approved, **see ticket** — @owner@example.com please confirm', 'markdown');
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^note_[0-9a-hjkmnp-tv-z]{26}$/),
      conversationId: c.id,
      authorId: agent.id,
      authorName: 'agent',
      content: 'Refund approved, **see ticket** — @owner@example.com please confirm',
      format: 'markdown',
      mentions: [{ accountId: owner.id, name: 'Olga Owner' }],
      createdAt: expect.any(String),
      editedAt: null,
    });
    const byOwner = await write(owner, c.id, 'Confirmed.');
    expect(byOwner.body.data).toMatchObject({ authorName: 'Olga Owner', format: 'plain', mentions: [] });
    // A note is no message: the card's times, the unread counts and the message list stay as they were.
    const after = (await as(agent, 'get', conv(c.id))).body.data;
    expect(after).toEqual(before);
    expect((await as(owner, 'get', conv(c.id))).body.data.unreadCount).toBe(1);
    const messages = await as(agent, 'get', conv(c.id, '/messages'));
    expect(messages.body.data.map((m: { content: string }) => m.content)).toEqual(['hello']);
  });

  test('keyset paging both ways, flat cursors; a cursor of the other order is 400', async () => {
    const c = await newConversation();
    for (let i = 1; i <= 5; i++) expect((await write(i % 2 ? agent : owner, c.id, `note ${i}`)).status).toBe(201);
    const contents = (res: request.Response) => res.body.data.map((n: { content: string }) => n.content);
    const first = await as(agent, 'get', conv(c.id, '/notes?limit=2'));
    expect(first.status).toBe(200);
    expect(contents(first)).toEqual(['note 1', 'note 2']);
    expect(first.body.page.hasMore).toBe(true);
    const second = await as(agent, 'get', conv(c.id, `/notes?limit=2&cursor=${first.body.page.nextCursor}`));
    expect(contents(second)).toEqual(['note 3', 'note 4']);
    const third = await as(agent, 'get', conv(c.id, `/notes?limit=2&cursor=${second.body.page.nextCursor}`));
    expect(contents(third)).toEqual(['note 5']);
    expect(third.body.page).toEqual({ nextCursor: null, hasMore: false });
    const newest = await as(agent, 'get', conv(c.id, '/notes?order=desc&limit=3'));
    expect(contents(newest)).toEqual(['note 5', 'note 4', 'note 3']);
    const older = await as(agent, 'get', conv(c.id, `/notes?order=desc&limit=3&cursor=${newest.body.page.nextCursor}`));
    expect(contents(older)).toEqual(['note 2', 'note 1']);
    const crossed = await as(agent, 'get', conv(c.id, `/notes?order=asc&cursor=${newest.body.page.nextCursor}`));
    expect(crossed.status).toBe(400);
    // Another conversation's cursor is refused too: it was made for other filters.
    const other = await newConversation();
    expect((await as(agent, 'get', conv(other.id, `/notes?cursor=${first.body.page.nextCursor}`))).status).toBe(400);
  });

  test('bad input is 400 with details, never 500', async () => {
    const c = await newConversation();
    const bad = async (body: unknown) => {
      const res = await as(agent, 'post', conv(c.id, '/notes')).send(body as object);
      expect([res.status, res.body.error?.code]).toEqual([400, 'invalid_request']);
    };
    await bad({});
    await bad({ content: '' });
    await bad({ content: '   \n ' });
    await bad({ content: 'x'.repeat(10_001) });
    await bad({ content: 'hi', format: 'html' });
    await bad({ content: 'hi', author: owner.id });
    await bad({ content: 42 });
    expect((await write(agent, c.id, '😀'.repeat(10_000))).status).toBe(201); // code points, as messages count them
    expect((await as(agent, 'get', conv(c.id, '/notes?limit=0'))).status).toBe(400);
    expect((await as(agent, 'get', conv(c.id, '/notes?order=sideways'))).status).toBe(400);
    expect((await as(agent, 'get', conv(c.id, '/notes?cursor=forged'))).status).toBe(400);
    expect((await as(agent, 'patch', conv(c.id, '/notes/not-a-note'), { content: 'x' })).status).toBe(400);
    expect((await as(agent, 'delete', conv(c.id, '/notes/not-a-note'))).status).toBe(400);
    expect((await as(agent, 'get', conv('conv_bad', '/notes'))).status).toBe(400);
  });

  test("another site's conversation and its notes are 404 to every operation; so is a site one is not a member of", async () => {
    const other = await h.newSite('Other');
    const theirs = (await h.visitorSay(other.id, 'v-other', 'hi')).conversation.id as string;
    const stranger = await memberWithToken(h, other.id, 'stranger@example.com', 'owner');
    const theirNote = (await as(stranger, 'post', conv(theirs, '/notes', other.id), { content: 'their secret' })).body.data.id as string;
    for (const path of [conv(theirs, '/notes'), conv(theirs, '/notes', other.id)]) {
      expect((await as(owner, 'get', path)).status).toBe(404);
      expect((await as(owner, 'post', path, { content: 'x' })).status).toBe(404);
      expect((await as(owner, 'patch', `${path}/${theirNote}`, { content: 'x' })).status).toBe(404);
      expect((await as(owner, 'delete', `${path}/${theirNote}`)).status).toBe(404);
    }
    // A note of another conversation of one's own site is not found under this one either.
    const mine = await newConversation();
    const elsewhere = await newConversation();
    const note = (await write(agent, elsewhere.id, 'elsewhere')).body.data.id as string;
    expect((await as(agent, 'patch', conv(mine.id, `/notes/${note}`), { content: 'moved?' })).status).toBe(404);
    expect((await as(owner, 'delete', conv(mine.id, `/notes/${note}`))).status).toBe(404);
    expect((await as(agent, 'get', conv('conv_00000000000000000000000000', '/notes'))).status).toBe(404);
    expect(await h.runtime.db('notes').where({ id: theirNote }).first('content')).toEqual({ content: 'their secret' });
    expect(await h.runtime.db('notes').where({ conversation_id: theirs }).count({ n: '*' }).first()).toMatchObject({ n: 1 });
  });

  test('a closed conversation still takes notes; a session writes them too (same-origin), a cross-site one is refused', async () => {
    const c = await newConversation();
    expect((await as(agent, 'post', conv(c.id, '/close'))).status).toBe(200);
    expect((await write(agent, c.id, 'closed: customer happy')).status).toBe(201);
    await newMember(h, site, 'session@example.com', 'agent');
    const { cookie } = await signIn(h, 'session@example.com');
    const ok = await request(h.app)
      .post(`${M}${conv(c.id, '/notes')}`)
      .set(SAME_ORIGIN)
      .set('Cookie', cookie)
      .send({ content: 'from a browser' });
    expect(ok.status).toBe(201);
    const cross = await request(h.app)
      .post(`${M}${conv(c.id, '/notes')}`)
      .set({ 'Sec-Fetch-Site': 'cross-site' })
      .set('Cookie', cookie)
      .send({ content: 'forged' });
    expect([cross.status, cross.body.error.code]).toEqual([403, 'cross_site_request']);
  });

  test('Idempotency-Key: a repeat answers the first note; a repeat while the first runs is 409; another body is 422', async () => {
    const c = await newConversation();
    const send = (content: string, key: string) => write(agent, c.id, content).set('Idempotency-Key', key);
    const first = await send('once only', 'note-key-1');
    const again = await send('once only', 'note-key-1');
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await send('something else', 'note-key-1')).status).toBe(422);
    // The first request held at its read of the members (its mention) while the same key comes again.
    const hold = holdStatements(h.runtime.db, /from [`"]memberships[`"] as [`"]m[`"] inner join/);
    try {
      const slow = send('@owner@example.com held', 'note-key-2').then((r) => r);
      await waitFor('the first request held', () => hold.held > 0);
      const repeat = await send('@owner@example.com held', 'note-key-2');
      expect([repeat.status, repeat.body.error.code]).toEqual([409, 'idempotency_key_in_use']);
      hold.release();
      expect((await slow).status).toBe(201);
    } finally {
      hold.release();
    }
    const notes = await h.runtime.db('notes').where({ conversation_id: c.id }).pluck('content');
    expect(notes.sort()).toEqual(['@owner@example.com held', 'once only']);
  });
});

describe('editing and deleting', () => {
  test('the author edits within 24 hours (editedAt set); another member is 403; after 24 hours it is 409', async () => {
    const c = await newConversation();
    const id = (await write(agent, c.id, 'first draft')).body.data.id as string;
    const edited = await as(agent, 'patch', conv(c.id, `/notes/${id}`), { content: 'second *draft*', format: 'markdown' });
    expect(edited.status).toBe(200);
    expect(edited.body.data).toMatchObject({ id, content: 'second *draft*', format: 'markdown', editedAt: expect.any(String) });
    // The format stays when not given.
    const kept = await as(agent, 'patch', conv(c.id, `/notes/${id}`), { content: 'third' });
    expect(kept.body.data).toMatchObject({ content: 'third', format: 'markdown' });
    for (const other of [owner, agent2]) {
      const res = await as(other, 'patch', conv(c.id, `/notes/${id}`), { content: 'not mine' });
      expect([res.status, res.body.error.code]).toEqual([403, 'forbidden']);
    }
    expect((await as(agent, 'patch', conv(c.id, `/notes/${id}`), { content: ' ' })).status).toBe(400);
    clockOffset = 24 * 3600_000 + 1000;
    const late = await as(agent, 'patch', conv(c.id, `/notes/${id}`), { content: 'too late' });
    expect([late.status, late.body.error.code]).toEqual([409, 'conflict']);
    const listed = await as(agent, 'get', conv(c.id, '/notes'));
    expect(listed.body.data.map((n: { content: string }) => n.content)).toEqual(['third']);
  });

  test("the author deletes their note; an agent may not delete another's; an owner may, and the audit log says so", async () => {
    const c = await newConversation();
    const mine = (await write(agent, c.id, 'mine')).body.data.id as string;
    const theirs = (await write(agent2, c.id, 'password: hunter2')).body.data.id as string;
    const refused = await as(agent, 'delete', conv(c.id, `/notes/${theirs}`));
    expect([refused.status, refused.body.error.code]).toEqual([403, 'forbidden']);
    expect((await as(agent, 'delete', conv(c.id, `/notes/${mine}`))).status).toBe(204);
    expect((await as(owner, 'delete', conv(c.id, `/notes/${theirs}`))).status).toBe(204);
    expect((await as(owner, 'delete', conv(c.id, `/notes/${theirs}`))).status).toBe(404);
    expect((await as(agent, 'get', conv(c.id, '/notes'))).body.data).toEqual([]);
    const audit = await as(owner, 'get', `/sites/${site}/audit-log?limit=10`);
    const deletions = audit.body.data.filter((e: { action: string }) => e.action === 'note.deleted');
    expect(deletions.map((e: { objectId: string; actor: { accountId: string } }) => [e.objectId, e.actor.accountId])).toEqual([
      [theirs, owner.id],
      [mine, agent.id],
    ]);
  });

  test('a former member of the site can no longer see, edit or delete notes', async () => {
    const leaving = await memberWithToken(h, site, 'leaving@example.com', 'agent');
    const c = await newConversation();
    const id = (await write(leaving, c.id, 'before leaving')).body.data.id as string;
    await h.runtime.services.accounts.members.remove(
      { manager: { accountId: owner.id, email: 'owner@example.com', via: 'token' }, clientIp: null },
      site,
      leaving.id,
    );
    expect((await as(leaving, 'get', conv(c.id, '/notes'))).status).toBe(404);
    expect((await as(leaving, 'patch', conv(c.id, `/notes/${id}`), { content: 'x' })).status).toBe(404);
    expect((await as(leaving, 'delete', conv(c.id, `/notes/${id}`))).status).toBe(404);
    // The note stays, by its author's name.
    expect((await as(agent, 'get', conv(c.id, '/notes'))).body.data[0]).toMatchObject({ authorId: leaving.id, authorName: 'leaving' });
  });
});

describe('mentions', () => {
  test('only members of the site are mentioned, once each, not the author, not inside code', async () => {
    const other = await h.newSite('Elsewhere');
    await newMember(h, other.id, 'outsider@example.com', 'owner');
    const c = await newConversation();
    const text =
      '@Agent2@Example.com and @owner@example.com, also @agent2@example.com again; not @outsider@example.com, not @nobody@example.com, ' +
      'not myself @agent@example.com, not `@owner@example.com` in code, not mail@owner@example.com';
    const res = await write(agent, c.id, text, 'markdown');
    expect(res.body.data.mentions).toEqual([
      { accountId: agent2.id, name: 'agent2' },
      { accountId: owner.id, name: 'Olga Owner' },
    ]);
    // In plain text, backticks are characters: the address inside them is a mention.
    const plain = await write(agent, c.id, 'see `@owner@example.com`', 'plain');
    expect(plain.body.data.mentions).toEqual([{ accountId: owner.id, name: 'Olga Owner' }]);
  });

  test('the mentioned member alone gets note.mentioned on their stream; every member sees note.created, .updated, .deleted', async () => {
    const open = async (who: { token: string }) => {
      const s = await openSse(server, `${M}/sites/${site}/inbox/events`, { Authorization: `Bearer ${who.token}` });
      streams.push(s);
      await s.waitFor((e) => e.event === 'ready');
      return s;
    };
    const [ownerStream, agentStream, agent2Stream] = [await open(owner), await open(agent), await open(agent2)];
    const c = await newConversation();
    const note = (await write(agent, c.id, 'ping @agent2@example.com')).body.data;
    await as(agent, 'patch', conv(c.id, `/notes/${note.id}`), { content: 'ping @agent2@example.com and @owner@example.com' });
    await as(agent, 'delete', conv(c.id, `/notes/${note.id}`));
    for (const s of [ownerStream, agentStream, agent2Stream]) await s.waitFor((e) => e.event === 'note.deleted', ARRIVAL_MS);
    const noteEvents = (s: SseStream) => s.events.filter((e) => e.event.startsWith('note.')).map((e) => e.event);
    expect(noteEvents(agentStream)).toEqual(['note.created', 'note.updated', 'note.deleted']);
    expect(noteEvents(agent2Stream)).toEqual(['note.created', 'note.mentioned', 'note.updated', 'note.deleted']);
    expect(noteEvents(ownerStream)).toEqual(['note.created', 'note.updated', 'note.mentioned', 'note.deleted']);
    const created = agentStream.events.find((e) => e.event === 'note.created')!.data;
    expect(created).toEqual(note);
    const mentioned = agent2Stream.events.find((e) => e.event === 'note.mentioned')!.data;
    expect(mentioned).toEqual({ accountId: agent2.id, mentionedBy: agent.id, note });
    expect(agentStream.events.find((e) => e.event === 'note.deleted')!.data).toEqual({ id: note.id, conversationId: c.id, deletedBy: agent.id });
  });
});

describe('never on the visitor side', () => {
  test('a note is not in the window (conversation, messages, poll, live stream), /api/v1, nor the events delivered', async () => {
    const marker = `internal-${Math.random().toString(36).slice(2)}`;
    await h.runtime.services.webhooks.setEndpoint(site, receiver.url('/notes'));
    workers.start();
    const t = await getToken(h.app, site);
    const said = await request(h.app)
      .post(w(site, '/messages'))
      .set('Origin', ORIGIN)
      .set(auth(t.token))
      .send({ content: 'window hello', clientMessageId: 'c-note-1' });
    expect(said.status).toBe(201);
    const id = said.body.data.conversation.id as string;
    const win = await openSse(server, w(site, '/events'), { Authorization: `Bearer ${t.token}`, Origin: ORIGIN });
    streams.push(win);
    await win.waitFor((e) => e.event === 'ready');
    const card = async () => (await request(h.app).get(`/api/v1/conversations/${id}`).set(bearer(h.site.key))).body.data;
    const before = await card();
    const window = (path: string) => request(h.app).get(w(site, path)).set('Origin', ORIGIN).set(auth(t.token));
    // The poll's position before the note: the poll after it reads everything since.
    const polledFrom = (await window('/events/poll')).body.lastEventId as string;

    const note = await write(agent, id, `${marker} @owner@example.com the customer is angry`);
    expect(note.status).toBe(201);
    const edited = await as(agent, 'patch', conv(id, `/notes/${note.body.data.id}`), { content: `${marker} edited` });
    expect(edited.status).toBe(200);
    // Then a reply: once it has reached the window, the delivery and everything else, the note had its chance to leak.
    const reply = await as(agent, 'post', conv(id, '/messages'), { content: 'reply after the note' });
    expect(reply.status).toBe(201);
    await win.waitFor((e) => e.event === 'message' && JSON.stringify(e.data).includes('reply after the note'), ARRIVAL_MS);
    await waitFor('the reply delivered', () => receiver.at('/notes').some((r) => r.body.toString().includes('reply after the note')), ARRIVAL_MS);

    const seen: [string, string][] = [
      ['window live stream', JSON.stringify(win.events)],
      ['window conversation', JSON.stringify((await window('/conversation')).body)],
      ['window messages', JSON.stringify((await window(`/conversations/${id}/messages`)).body)],
      ['window poll', JSON.stringify((await window(`/events/poll?lastEventId=${encodeURIComponent(polledFrom)}`)).body)],
      ['api messages', JSON.stringify((await request(h.app).get(`/api/v1/conversations/${id}/messages`).set(bearer(h.site.key))).body)],
      ['api conversations', JSON.stringify((await request(h.app).get('/api/v1/conversations?limit=100').set(bearer(h.site.key))).body)],
      [
        'events delivered',
        receiver
          .at('/notes')
          .map((r) => r.body.toString())
          .join('\n'),
      ],
      ['events stored', JSON.stringify(await h.runtime.db('events').where({ site_id: site }).pluck('body'))],
    ];
    // Each place was read for real: the reply is there, the note is not.
    for (const [where, text] of seen.filter(([where]) => !where.startsWith('api conversations') && where !== 'window conversation')) {
      expect([where, text.includes('reply after the note')]).toEqual([where, true]);
    }
    for (const [where, text] of seen) expect([where, text.includes(marker)]).toEqual([where, false]);
    // The card moved for the reply only: a note alone leaves `updatedAt` as it was (checked in the first test); no event names a note.
    expect(Date.parse((await card()).updatedAt)).toBeGreaterThanOrEqual(Date.parse(before.updatedAt));
    expect(await h.runtime.db('events').where({ site_id: site }).andWhere('name', 'like', 'note%').count({ n: '*' }).first()).toMatchObject({ n: 0 });
  }, 30_000);
});

describe('the timeline', () => {
  test("notes appear among the conversation's messages in time order, with their author and text", async () => {
    const c = await newConversation('first message');
    const note = (await write(owner, c.id, 'a note between')).body.data;
    await h.visitorSay(site, c.visitor, 'second message');
    const res = await as(agent, 'get', `/sites/${site}/conversations/${c.id}/timeline`);
    expect(res.status).toBe(200);
    const kinds = res.body.data.filter((e: { type: string }) => e.type !== 'event' && e.type !== 'attempt').map((e: { type: string }) => e.type);
    expect(kinds).toEqual(['message', 'note', 'message']);
    expect(res.body.data.find((e: { type: string }) => e.type === 'note')).toEqual({
      type: 'note',
      at: note.createdAt,
      noteId: note.id,
      authorId: owner.id,
      authorName: 'Olga Owner',
      content: 'a note between',
      format: 'plain',
      editedAt: null,
    });
  });

  test("removeForConversations removes exactly those conversations' notes (the visitor-data deletion calls it)", async () => {
    const [a, b] = [await newConversation(), await newConversation()];
    await write(agent, a.id, 'a1');
    await write(agent, a.id, 'a2');
    await write(agent, b.id, 'b1');
    const { store } = h.runtime.services.notes;
    const other = await h.newSite('Not this one');
    const removed = await h.runtime.db.transaction((trx) => store.removeForConversations(trx, other.id, [a.id]));
    expect(removed).toBe(0);
    expect(await h.runtime.db.transaction((trx) => store.removeForConversations(trx, site, [a.id]))).toBe(2);
    expect((await as(agent, 'get', conv(a.id, '/notes'))).body.data).toEqual([]);
    expect((await as(agent, 'get', conv(b.id, '/notes'))).body.data.map((n: { content: string }) => n.content)).toEqual(['b1']);
  });
});
