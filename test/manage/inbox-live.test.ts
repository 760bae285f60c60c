/**
 * The inbox's live stream (GET /manage/v1/sites/{siteId}/inbox/events) on a real HTTPS server:
 * every kind of change arrives, read marks only to their own member, resume with Last-Event-ID
 * after a cut (nothing lost, nothing twice), two service instances on one database with Redis,
 * the limits, and the end of the stream when the session ends. A dashboard reply also reaches the
 * chat window's own live stream.
 */
import request from 'supertest';
import { testApp } from '../helpers/test-app';
import { openRuntime, Runtime } from '../../server/runtime';
import { dialectOf } from '../../server/db/knex';
import { createStreamRegistry } from '../../server/window/streams';
import type { Harness } from '../helpers/harness';
import { listenHttps } from '../helpers/harness';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { holdStatements } from '../helpers/held-statements';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';
import { allowOrigins, auth, getToken, openSse, ORIGIN, SseEvent, SseStream, w } from '../window/helpers';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from './helpers';
import { TEST_HASHER } from './helpers';

const REDIS_PASSWORD = 'inbox-redis-pw-5d1e9a';
/**
 * How long a test waits for a change to reach a stream: a liveness bound far above the milliseconds
 * the channel takes. Which path brought it (the channel, the hub's poll, a heartbeat's re-read) is
 * told by holding the poll and counting heartbeats, never by how fast it came.
 */
const ARRIVAL_MS = 10_000;
let redis: PrivateRedis | undefined;
let h: Harness;
let other: Runtime;
let server: { url: string; ca: string; close(): Promise<void> };
let otherServer: { url: string; ca: string; close(): Promise<void> };
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
const streams: SseStream[] = [];

beforeAll(async () => {
  const port = await freePort();
  redis = await startPrivateRedis(port, REDIS_PASSWORD);
  h = await manageHarness({ env: { REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${port}` } });
  // A second instance of the service on the same database and Redis.
  other = await openRuntime(h.config, { passwordHasher: TEST_HASHER });
  const otherApp = testApp(other.services);
  site = h.site.id;
  await allowOrigins(h, site);
  const o = await newMember(h, site, 'owner@example.com', 'owner');
  const a = await newMember(h, site, 'agent@example.com', 'agent');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  server = await listenHttps(h.app);
  otherServer = await listenHttps(otherApp);
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

const path = (rest = '') => `${M}/sites/${site}/inbox${rest}`;
async function stream(cookie: string, lastEventId?: string, base = server) {
  const headers: Record<string, string> = { Cookie: cookie };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  const s = await openSse(base, path('/events'), headers);
  streams.push(s);
  return s;
}
const post = (rest: string, cookie: string, body: object = {}) => request(h.app).post(path(rest)).set(SAME_ORIGIN).set('Cookie', cookie).send(body);
let visitors = 0;
const newVisitor = () => `live-visitor-${++visitors}`;
const names = (events: SseEvent[]) => events.filter((e) => e.event !== 'ready').map((e) => e.event);
const ready = (s: SseStream) => s.waitFor((e) => e.event === 'ready');

describe('the inbox stream', () => {
  test('new conversations, messages, replies, assignments, closes and read marks arrive in order', async () => {
    const s = await stream(agent.cookie);
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(s.headers['cache-control']).toBe('no-store');
    const start = await ready(s);
    const ownerStream = await stream(owner.cookie);
    await ready(ownerStream);

    const visitor = newVisitor();
    const conv = (await h.visitorSay(site, visitor, 'hi there')).conversation.id;
    const reply = await post(`/conversations/${conv}/messages`, agent.cookie, { content: 'hello from the team' });
    expect(reply.status).toBe(201);
    expect((await post(`/conversations/${conv}/assignee`, agent.cookie, { assigneeId: agent.id })).status).toBe(200);
    expect((await post(`/conversations/${conv}/close`, agent.cookie)).status).toBe(200);
    expect((await post(`/conversations/${conv}/read`, owner.cookie)).status).toBe(200);

    await s.waitFor((e) => e.event === 'conversation.closed');
    await ownerStream.waitFor((e) => e.event === 'conversation.read');
    await s.waitFor((e) => e.event === 'conversation.read'); // the agent's own mark, from the reply
    const seen = s.events.filter((e) => e.event !== 'ready');
    // A first message is written with its conversation: message.created, then conversation.started (as to event addresses).
    expect(names(s.events)).toEqual([
      'message.created',
      'conversation.started',
      'message.created',
      'conversation.read',
      'conversation.assigned',
      'conversation.closed',
    ]);
    // Ids are the feed's positions: increasing from the ready event's.
    const positions = seen.map((e) => Number(e.id));
    expect(positions[0]).toBeGreaterThan(Number(start.id));
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    const replyEvent = seen[2].data as { message: { authorId: string; origin: string; content: string } };
    expect(replyEvent.message).toMatchObject({ authorId: agent.id, origin: 'messenger', content: 'hello from the team' });
    expect(seen[3].data).toMatchObject({ conversationId: conv, accountId: agent.id });
    expect(seen[4].data).toEqual({ conversationId: conv, assigneeId: agent.id, assignedBy: agent.id });
    // The owner sees their own read mark and not the agent's.
    await new Promise((r) => setTimeout(r, 200));
    const reads = ownerStream.events.filter((e) => e.event === 'conversation.read');
    expect(reads.map((e) => (e.data as { accountId: string }).accountId)).toEqual([owner.id]);
    // Neither assignments nor read marks are public events.
    const events = await h.runtime.db('events').where({ site_id: site }).andWhere('body', 'like', `%${conv}%`).pluck('name');
    expect(events.sort()).toEqual(['conversation.closed', 'conversation.started', 'message.created', 'message.created']);
  });

  test("a dashboard reply reaches the chat window's live stream", async () => {
    const t = await getToken(h.app, site);
    const sent = await request(h.app).post(w(site, '/messages')).set(auth(t.token)).send({ content: 'from the window', clientMessageId: 'c-inbox-1' });
    const conv = sent.body.data.conversation.id;
    const win = await openSse(server, w(site, '/events'), { Authorization: `Bearer ${t.token}`, Origin: ORIGIN });
    streams.push(win);
    await win.waitFor((e) => e.event === 'ready');
    expect((await post(`/conversations/${conv}/messages`, owner.cookie, { content: 'answer from the inbox' })).status).toBe(201);
    const got = await win.waitFor((e) => e.event === 'message' && (e.data as { message: { content: string } }).message.content === 'answer from the inbox');
    expect(got.data).toMatchObject({ message: { direction: 'outgoing' } });
    expect((got.data as { message: object }).message).not.toHaveProperty('authorId');
  });

  test('resume after a cut: exactly the events missed, none twice', async () => {
    const first = await stream(owner.cookie);
    await ready(first);
    const visitor = newVisitor();
    const conv = (await h.visitorSay(site, visitor, 'one')).conversation.id;
    const last = await first.waitFor((e) => e.event === 'conversation.started');
    first.close();
    // While nobody listens: messages, an assignment, a read mark of the owner's.
    await h.visitorSay(site, visitor, 'two');
    await post(`/conversations/${conv}/assignee`, owner.cookie, { assigneeId: agent.id });
    await h.visitorSay(site, visitor, 'three');
    await post(`/conversations/${conv}/read`, owner.cookie);
    const resumed = await stream(owner.cookie, last.id);
    await resumed.waitFor((e) => e.event === 'conversation.read');
    await h.visitorSay(site, visitor, 'four');
    await resumed.waitFor((e) => e.event === 'message.created' && (e.data as { message: { content: string } }).message.content === 'four');
    const got = resumed.events.filter((e) => e.event !== 'ready');
    expect(got.map((e) => e.event)).toEqual(['message.created', 'conversation.assigned', 'message.created', 'conversation.read', 'message.created']);
    expect(got.filter((e) => e.event === 'message.created').map((e) => (e.data as { message: { content: string } }).message.content)).toEqual([
      'two',
      'three',
      'four',
    ]);
    expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    expect(Number(got[0].id)).toBeGreaterThan(Number(last.id));
  });

  test('concurrent writers (on both instances with MariaDB): every position arrives once, in order, none skipped', async () => {
    const s = await stream(owner.cookie, undefined, otherServer);
    const start = Number((await ready(s)).id);
    // On SQLite the two instances share one process here, and better-sqlite3 waits for the write
    // lock synchronously, holding up the other connection that has it: one instance writes there.
    const both = dialectOf(h.runtime.db) === 'mysql';
    const writers = [h.runtime.services.window.chat, (both ? other : h.runtime).services.window.chat];
    // 24 first messages at once, half through each instance: 48 feed rows (message.created, conversation.started).
    await Promise.all(Array.from({ length: 24 }, (_, i) => writers[i % 2].visitorSay(site, newVisitor(), `burst ${i}`)));
    await waitFor('every row on the stream', () => s.events.length - 1 >= 48, 10_000);
    const positions = s.events.filter((e) => e.event !== 'ready').map((e) => Number(e.id));
    expect(positions).toEqual(Array.from({ length: 48 }, (_, i) => start + 1 + i));
  });

  test('a stream requested with an empty JSON body (Content-Type and Content-Length: 0) opens', async () => {
    // The body is read before the route; the stream must still answer (it once never did: found by the fuzz).
    const s = await openSse(server, path('/events'), { Cookie: agent.cookie, 'Content-Type': 'application/json', 'Content-Length': '0' });
    streams.push(s);
    await ready(s);
  }, 10_000);

  test("a Last-Event-ID the feed never had is 400; another site's stream is 404", async () => {
    const bad = await request(h.app).get(path('/events')).set('Cookie', owner.cookie).set('Last-Event-ID', '999999999');
    expect(bad.status).toBe(400);
    const other = await h.newSite('Elsewhere');
    const res = await request(h.app).get(`${M}/sites/${other.id}/inbox/events`).set('Cookie', owner.cookie);
    expect(res.status).toBe(404);
  });

  test("across two instances on one database: a change on one reaches a stream on the other by the channel, the other's poll held", async () => {
    // The other instance's streams without a heartbeat (whose re-read would find the change too), and
    // its hub's poll held at its next read: only Redis can carry the change.
    const saved = other.services.inbox.streams;
    other.services.inbox.streams = createStreamRegistry({ heartbeatMs: 3_600_000 });
    const s = await stream(agent.cookie, undefined, otherServer);
    await ready(s);
    // The poll's read of every watched site's position (`site_id in (...)`), not a stream's own tail.
    const poll = holdStatements(other.db, /inbox_positions.* in \(/);
    try {
      // A poll already past the gate could still see the change: wait for one held there (with Redis
      // live the hub polls once in its 5 s safety interval).
      await waitFor("the other instance's poll held", () => poll.held > 0, 15_000);
      const visitor = newVisitor();
      const conv = (await h.visitorSay(site, visitor, 'on instance one')).conversation.id;
      await s.waitFor((e) => e.event === 'message.created', ARRIVAL_MS);
      await post(`/conversations/${conv}/assignee`, owner.cookie, { assigneeId: agent.id });
      await s.waitFor((e) => e.event === 'conversation.assigned', ARRIVAL_MS);
      expect(poll.held).toBe(1); // the one poll held was all: none read meanwhile
      expect(s.pings).toBe(0);
    } finally {
      poll.release();
      other.services.inbox.streams.closeAll();
      other.services.inbox.streams = saved;
    }
  });
});

describe('limits and the end of a stream', () => {
  let saved: typeof h.runtime.services.inbox.streams;
  beforeEach(() => {
    saved = h.runtime.services.inbox.streams;
  });
  afterEach(() => {
    h.runtime.services.inbox.streams.closeAll();
    h.runtime.services.inbox.streams = saved;
  });

  test('a sixth stream of one account ends its oldest; beyond the total, 503 with Retry-After', async () => {
    h.runtime.services.inbox.streams = createStreamRegistry({ total: 7 });
    const mine: SseStream[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push(await stream(agent.cookie));
      await ready(mine[i]);
    }
    const sixth = await stream(agent.cookie);
    await ready(sixth);
    await mine[0].ended;
    expect(h.runtime.services.inbox.streams.count()).toBe(5);
    await ready(await stream(owner.cookie));
    await ready(await stream(owner.cookie));
    const refused = await request(h.app).get(path('/events')).set('Cookie', owner.cookie);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('10');
    expect(refused.body.error.code).toBe('service_unavailable');
  });

  test('the stream ends with session-ended once the session is signed out (checked at the heartbeat)', async () => {
    h.runtime.services.inbox.streams = createStreamRegistry({ heartbeatMs: 200 });
    const session = await signIn(h, 'agent@example.com');
    const s = await stream(session.cookie);
    await ready(s);
    await new Promise((r) => setTimeout(r, 500));
    expect(s.events.some((e) => e.event === 'session-ended')).toBe(false);
    expect((await request(h.app).delete(`${M}/session`).set(SAME_ORIGIN).set('Cookie', session.cookie)).status).toBe(204);
    await s.waitFor((e) => e.event === 'session-ended', 3000);
    await s.ended;
  });
});
