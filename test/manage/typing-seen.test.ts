/**
 * Typing and "seen" between the chat window and the inbox (issue 25, item 4), on real HTTPS
 * servers: two instances of the service on one database and one Redis. Typing reaches the other
 * side's live stream (on either instance) without an id and is never stored: no row anywhere, and
 * no delivery worker woken (counted). A flood of typing reports reaches members as a throttled
 * trickle. "Seen" is stored, moves forward only, and reaches members' streams as a feed event.
 */
import request from 'supertest';
import { testApp } from '../helpers/test-app';
import { openRuntime, Runtime } from '../../server/runtime';
import type { Harness } from '../helpers/harness';
import { listenHttps } from '../helpers/harness';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';
import { allowOrigins, auth, getToken, openSse, ORIGIN, SseEvent, SseStream, TokenAnswer, w } from '../window/helpers';
import { M, manageHarness, memberWithToken, TEST_HASHER } from './helpers';

/** A liveness bound far above the milliseconds a signal takes through the channel. */
const ARRIVAL_MS = 10_000;
const REDIS_PASSWORD = 'typing-redis-pw-77a1';

let redis: PrivateRedis | undefined;
let h: Harness;
let other: Runtime;
let server: { url: string; ca: string; close(): Promise<void> };
let otherServer: { url: string; ca: string; close(): Promise<void> };
let site: string;
let agent: { id: string; token: string };
let agent2: { id: string; token: string };
/** Times each instance's delivery-worker hook was woken by the channel. */
const wakes = { here: 0, there: 0 };
const streams: SseStream[] = [];

beforeAll(async () => {
  const port = await freePort();
  redis = await startPrivateRedis(port, REDIS_PASSWORD);
  h = await manageHarness({
    env: { REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${port}`, RATE_LIMIT_PER_MINUTE: '100000' },
    onEvents: () => wakes.here++,
  });
  other = await openRuntime(h.config, { passwordHasher: TEST_HASHER, onEvents: () => wakes.there++ });
  site = h.site.id;
  await allowOrigins(h, site);
  agent = await memberWithToken(h, site, 'agent@example.com', 'agent');
  agent2 = await memberWithToken(h, site, 'agent2@example.com', 'agent');
  server = await listenHttps(h.app);
  otherServer = await listenHttps(testApp(other.services));
  await waitFor('both instances to hear Redis', () => h.runtime.services.channel.live() && other.services.channel.live());
}, 60_000);
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});
afterAll(async () => {
  await server?.close();
  await otherServer?.close();
  await other?.close();
  await h?.close();
  await stopPrivateRedis(redis);
});

const as = (who: { token: string }, method: 'get' | 'post', path: string, body?: object) => {
  const r = request(h.app)[method](`${M}/sites/${site}${path}`).set('Authorization', `Bearer ${who.token}`);
  return body ? r.send(body) : r;
};
const win = (t: TokenAnswer, path: string, body: object) => request(h.app).post(w(site, path)).set('Origin', ORIGIN).set(auth(t.token)).send(body);

async function inboxStream(who: { token: string }, base = server, lastEventId?: string) {
  const headers: Record<string, string> = { Authorization: `Bearer ${who.token}` };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  const s = await openSse(base, `${M}/sites/${site}/inbox/events`, headers);
  streams.push(s);
  await s.waitFor((e) => e.event === 'ready', ARRIVAL_MS);
  return s;
}
async function windowStream(t: TokenAnswer, base = server) {
  const s = await openSse(base, w(site, '/events'), { ...auth(t.token), Origin: ORIGIN });
  streams.push(s);
  await s.waitFor((e) => e.event === 'ready', ARRIVAL_MS);
  return s;
}
/** A visitor of the window with an open conversation. */
async function visitorWithConversation() {
  const t = await getToken(h.app, site);
  const said = await win(t, '/messages', { content: 'hello', clientMessageId: `c-${Math.random()}` });
  expect(said.status).toBe(201);
  return { t, conversationId: said.body.data.conversation.id as string };
}
/** What is stored: every table a change could have written to. */
async function storedCounts() {
  const db = h.runtime.db;
  const count = async (table: string) => Number((await db(table).count({ n: '*' }))[0].n);
  return { events: await count('events'), activity: await count('inbox_activity'), messages: await count('messages'), seen: await count('conversation_seen') };
}
const typingOf = (s: SseStream, name: string) => s.events.filter((e) => e.event === name);

describe('typing', () => {
  test("the visitor's typing reaches members on both instances, without an id, stored nowhere and waking no delivery worker", async () => {
    const here = await inboxStream(agent);
    const there = await inboxStream(agent2, otherServer);
    const { t, conversationId } = await visitorWithConversation();
    // Once each instance's stream has the message, its worker hook has heard the same channel message.
    for (const s of [here, there]) await s.waitFor((e) => e.event === 'conversation.started', ARRIVAL_MS);
    const before = await storedCounts();
    const wakesBefore = { ...wakes };

    expect((await win(t, `/conversations/${conversationId}/typing`, { typing: true })).status).toBe(204);
    for (const s of [here, there]) {
      const e = await s.waitFor((x) => x.event === 'conversation.typing', ARRIVAL_MS);
      expect(e.id).toBeUndefined();
      expect(e.data).toEqual({ conversationId, from: 'visitor', accountId: null, typing: true });
    }
    expect((await win(t, `/conversations/${conversationId}/typing`, { typing: false })).status).toBe(204);
    for (const s of [here, there]) await s.waitFor((x) => x.event === 'conversation.typing' && (x.data as { typing: boolean }).typing === false, ARRIVAL_MS);

    expect(await storedCounts()).toEqual(before);
    // A reply afterwards is an outbox event: it wakes the workers; the signals before it did not.
    expect(wakes).toEqual(wakesBefore);
    const reply = await as(agent, 'post', `/inbox/conversations/${conversationId}/messages`, { content: 'on it' });
    expect(reply.status).toBe(201);
    await waitFor('the reply to wake both workers', () => wakes.here > wakesBefore.here && wakes.there > wakesBefore.there, ARRIVAL_MS);
  });

  test("a member's typing reaches the visitor's window and the other members, not the member typing", async () => {
    const { t, conversationId } = await visitorWithConversation();
    const windowHere = await windowStream(t, otherServer);
    const typist = await inboxStream(agent);
    const colleague = await inboxStream(agent2, otherServer);

    expect((await as(agent, 'post', `/inbox/conversations/${conversationId}/typing`, { typing: true })).status).toBe(204);
    const shown = await windowHere.waitFor((e) => e.event === 'typing', ARRIVAL_MS);
    expect(shown).toEqual({ id: undefined, event: 'typing', data: { conversationId, typing: true } });
    const seenByColleague = await colleague.waitFor((e) => e.event === 'conversation.typing', ARRIVAL_MS);
    expect(seenByColleague.data).toEqual({ conversationId, from: 'agent', accountId: agent.id, typing: true });
    // The visitor types next: once the typist's stream has that, it would have had its own before.
    await win(t, `/conversations/${conversationId}/typing`, { typing: true });
    await typist.waitFor((e) => e.event === 'conversation.typing', ARRIVAL_MS);
    expect(typingOf(typist, 'conversation.typing').map((e) => (e.data as { from: string }).from)).toEqual(['visitor']);
  });

  test('a visitor flooding typing reports reaches members as a throttled trickle', async () => {
    const { t, conversationId } = await visitorWithConversation();
    const s = await inboxStream(agent);
    for (let i = 0; i < 40; i++) expect((await win(t, `/conversations/${conversationId}/typing`, { typing: i % 2 === 0 })).status).toBe(204);
    // A marker after the flood: a reply's event, on the same stream after the signals.
    await as(agent2, 'post', `/inbox/conversations/${conversationId}/messages`, { content: 'marker' });
    await s.waitFor((e) => e.event === 'message.created' && (e.data as { message: { content: string } }).message.content === 'marker', ARRIVAL_MS);
    const relayed = typingOf(s, 'conversation.typing').filter((e) => (e.data as { conversationId: string }).conversationId === conversationId);
    // One start and one stop per 2 s throttle period: the 40 reports fit in a few periods at most.
    expect(relayed.length).toBeGreaterThanOrEqual(1);
    expect(relayed.length).toBeLessThanOrEqual(6);
  });

  test("bad input, another visitor's conversation, an unknown one", async () => {
    const { t, conversationId } = await visitorWithConversation();
    const stranger = await getToken(h.app, site);
    expect((await win(t, `/conversations/${conversationId}/typing`, { typing: 'yes' })).status).toBe(400);
    expect((await win(t, `/conversations/${conversationId}/typing`, {})).status).toBe(400);
    expect((await win(stranger, `/conversations/${conversationId}/typing`, { typing: true })).status).toBe(404);
    expect((await as(agent, 'post', `/inbox/conversations/conv_00000000000000000000000000/typing`, { typing: true })).status).toBe(404);
    expect((await as(agent, 'post', `/inbox/conversations/${conversationId}/typing`, { typing: 1 })).status).toBe(400);
  });
});

describe('seen', () => {
  test('stored, forward only and idempotent; members see it live and after a resume', async () => {
    const { t, conversationId } = await visitorWithConversation();
    const s = await inboxStream(agent);
    const there = await inboxStream(agent2, otherServer);
    const startId = s.events[0].id;
    const first = (await as(agent, 'post', `/inbox/conversations/${conversationId}/messages`, { content: 'one' })).body.data;
    const second = (await as(agent, 'post', `/inbox/conversations/${conversationId}/messages`, { content: 'two' })).body.data;
    expect((await as(agent, 'get', `/inbox/conversations/${conversationId}/seen`)).body).toEqual({ data: null });
    // Once each instance's stream has the second reply, its worker hook has heard the same channel message.
    for (const x of [s, there])
      await x.waitFor((e) => e.event === 'message.created' && (e.data as { message: { id: string } }).message.id === second.id, ARRIVAL_MS);
    const wakesBefore = { ...wakes };

    const marked = await win(t, `/conversations/${conversationId}/seen`, { messageId: second.id });
    expect(marked.status).toBe(200);
    expect(marked.body.data).toEqual({ conversationId, messageId: second.id, seenAt: expect.any(String) });
    const live = await s.waitFor((e) => e.event === 'conversation.seen', ARRIVAL_MS);
    await there.waitFor((e) => e.event === 'conversation.seen', ARRIVAL_MS);
    expect(live.id).toMatch(/^\d+$/);
    expect(live.data).toEqual(marked.body.data);
    expect((await as(agent, 'get', `/inbox/conversations/${conversationId}/seen`)).body).toEqual(marked.body);
    // An inbox feed row, not an outbox event: no delivery worker was woken for it.
    expect(wakes).toEqual(wakesBefore);

    // An older reply, or the same again: the mark stays, and nothing new is written.
    const stored = await storedCounts();
    expect((await win(t, `/conversations/${conversationId}/seen`, { messageId: first.id })).body).toEqual(marked.body);
    expect((await win(t, `/conversations/${conversationId}/seen`, { messageId: second.id })).body).toEqual(marked.body);
    expect(await storedCounts()).toEqual(stored);

    // A stream resumed from before the mark replays it (it is a feed row, unlike typing).
    const resumed = await inboxStream(agent, otherServer, startId);
    const replayed = await resumed.waitFor((e) => e.event === 'conversation.seen', ARRIVAL_MS);
    expect(replayed.id).toBe(live.id);
    expect(resumed.events.some((e: SseEvent) => e.event === 'conversation.typing')).toBe(false);
  });

  test("only a reply of the visitor's own conversation can be seen", async () => {
    const { t, conversationId } = await visitorWithConversation();
    const own = (
      await request(h.app)
        .get(w(site, `/conversations/${conversationId}/messages`))
        .set('Origin', ORIGIN)
        .set(auth(t.token))
    ).body.data[0];
    const elsewhere = await visitorWithConversation();
    const reply = (await as(agent, 'post', `/inbox/conversations/${elsewhere.conversationId}/messages`, { content: 'not yours' })).body.data;
    const refused = await win(t, `/conversations/${conversationId}/seen`, { messageId: own.id });
    expect(refused.status).toBe(400);
    expect(refused.body.error.details).toEqual([{ path: '/body/messageId', message: 'must be a reply in this conversation' }]);
    expect((await win(t, `/conversations/${conversationId}/seen`, { messageId: reply.id })).status).toBe(400);
    expect((await win(t, `/conversations/${elsewhere.conversationId}/seen`, { messageId: reply.id })).status).toBe(404);
    expect((await win(t, `/conversations/${conversationId}/seen`, { messageId: 'not-an-id' })).status).toBe(400);
    expect((await as(agent, 'get', `/inbox/conversations/conv_00000000000000000000000000/seen`)).status).toBe(404);
  });

  test("deleting the visitor's data removes its marks", async () => {
    const { t, conversationId } = await visitorWithConversation();
    const reply = (await as(agent, 'post', `/inbox/conversations/${conversationId}/messages`, { content: 'bye' })).body.data;
    expect((await win(t, `/conversations/${conversationId}/seen`, { messageId: reply.id })).status).toBe(200);
    const owner = await memberWithToken(h, site, `owner-${Math.random().toString(36).slice(2)}@example.com`, 'owner');
    const deleted = await as(owner, 'post', '/visitor-deletions', { visitorId: t.visitorId });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data.removed.seen).toBe(1);
    expect(await h.runtime.db('conversation_seen').where({ conversation_id: conversationId }).first()).toBeUndefined();
  });
});
