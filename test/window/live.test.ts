import request from 'supertest';
import { createHarness, Harness, bearer, listenHttps } from '../helpers/harness';
import express from 'express';
import { openRuntime, Runtime } from '../../server/runtime';
import { windowRoutes } from '../../server/window/routes';
import { errorHandler, notFoundHandler } from '../../server/http/error-handler';
import { createLogger } from '../../server/platform/logger';
import type { StreamLimits } from '../../server/window/streams';
import { createLiveHub } from '../../server/window/live';
import { waitFor } from '../helpers/wait';
import { allowOrigins, ARRIVAL_MS, auth, getToken, messageContent, openSse, ORIGIN, SseEvent, SseStream, w } from './helpers';

let h: Harness;
let server: { url: string; ca: string; close(): Promise<void> };
const streams: SseStream[] = [];
beforeAll(async () => {
  h = await createHarness();
  await allowOrigins(h, h.site.id);
  server = await listenHttps(h.app);
});
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function stream(token: string, lastEventId?: string, origin?: string) {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  if (origin) headers.Origin = origin;
  const s = await openSse(server, w(h.site.id, '/events'), headers);
  streams.push(s);
  return s;
}

const send = (token: string, content: string) =>
  request(h.app)
    .post(w(h.site.id, '/messages'))
    .set(auth(token))
    .send({ content, clientMessageId: `c-${Math.random().toString(36).slice(2)}` });
const apiReply = (convId: string, content: string) => request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).send({ content });
/** The window entry alone on a server of its own, with its own stream limits. */
async function listenWithLimits(limits: Partial<StreamLimits>) {
  const app = express();
  app.use(
    '/window/v1',
    windowRoutes({ services: h.runtime.services, limiter: h.limiter, logger: createLogger('silent'), validateResponses: true, streams: limits }),
  );
  app.use(notFoundHandler);
  app.use(errorHandler(createLogger('silent')));
  return listenHttps(app);
}
/**
 * Runs `during` while the hub's poll is stopped at its first read (its grouped count waits on a
 * gate), so that whatever reaches a stream meanwhile was brought by the commit's notice. It starts
 * once a poll waits at the gate: one in flight before could still see the writes of `during`.
 */
async function withPollHeld<T>(during: () => Promise<T>): Promise<T> {
  const events = h.runtime.services.stores.events;
  const real = events.recentEventCounts;
  let open = () => {};
  const gate = new Promise<void>((r) => (open = r));
  let waiting = 0;
  events.recentEventCounts = async (...args) => {
    waiting++;
    await gate;
    return real(...args);
  };
  try {
    await waitFor("the hub's poll to wait at the gate", () => waiting > 0);
    return await during();
  } finally {
    events.recentEventCounts = real;
    open();
  }
}
const summary = (events: SseEvent[]) =>
  events.filter((e) => e.event !== 'ready').map((e) => (e.event === 'message' ? `message:${messageContent(e)}` : e.event));

describe('live updates by Server-Sent Events', () => {
  test("an API reply reaches an open stream by the commit's notice, with the poll held and before the first heartbeat", async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, 'hi');
    const convId = first.body.data.conversation.id;
    const s = await stream(t.token, undefined, ORIGIN);
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(s.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(s.headers['cache-control']).toBe('no-store');
    const ready = await s.waitFor((e) => e.event === 'ready');
    expect(ready.id).toMatch(new RegExp(`^${convId}\\.`));
    const timings: number[] = [];
    await withPollHeld(async () => {
      for (let i = 0; i < 5; i++) {
        const before = s.events.length;
        const reply = await apiReply(convId, `reply ${i}`);
        const written = Date.now();
        expect(reply.status).toBe(201);
        const got = await s.waitFor((e) => messageContent(e) === `reply ${i}`, ARRIVAL_MS, before);
        timings.push(Date.now() - written);
        expect(got.data).toMatchObject({ message: { id: reply.body.data.id, direction: 'outgoing', content: `reply ${i}` } });
      }
      // The stream's first heartbeat (15 s after it opened) had not come either: the notice brought them all.
      expect(s.pings).toBe(0);
    });
    // Measured figure for the report.
    process.stdout.write(`SSE delivery after the API's 201 (ms): ${timings.join(', ')}\n`);
  });

  test('a reply written by another process (no in-process notice) arrives by the poll, before the first heartbeat', async () => {
    const other: Runtime = await openRuntime(h.config);
    try {
      const t = await getToken(h.app, h.site.id);
      const first = await send(t.token, 'anyone there?');
      const s = await stream(t.token);
      await s.waitFor((e) => e.event === 'ready');
      const start = Date.now();
      await other.services.messages.reply(h.site.id, first.body.data.conversation.id, {
        direction: 'outgoing',
        origin: 'messenger',
        apiKeyId: null,
        content: 'from the CLI',
        format: 'plain',
        files: [],
      });
      await s.waitFor((e) => messageContent(e) === 'from the CLI', ARRIVAL_MS);
      process.stdout.write(`SSE delivery of another process's write (ms): ${Date.now() - start}\n`);
      expect(s.pings).toBe(0); // not the heartbeat's re-read, 15 s after the stream opened
    } finally {
      await other.close();
    }
  });

  test('a close and the next conversation reach the stream in order', async () => {
    const t = await getToken(h.app, h.site.id);
    const s = await stream(t.token);
    await s.waitFor((e) => e.event === 'ready');
    const first = await send(t.token, 'one');
    const convId = first.body.data.conversation.id;
    await request(h.app).post(`/api/v1/conversations/${convId}/close`).set(bearer(h.site.key)).expect(200);
    const closed = await s.waitFor((e) => e.event === 'conversation.closed', ARRIVAL_MS);
    expect(closed.id).toBe(`${convId}.closed`);
    expect(closed.data).toMatchObject({ conversation: { id: convId, state: 'closed' } });
    const next = await send(t.token, 'two');
    expect(next.body.data.conversation.id).not.toBe(convId);
    await s.waitFor((e) => messageContent(e) === 'two', ARRIVAL_MS);
    expect(summary(s.events)).toEqual(['conversation.started', 'message:one', 'conversation.closed', 'conversation.started', 'message:two']);
  });

  test('a reconnect with Last-Event-ID after a dropped connection gets exactly what it missed', async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, 'start');
    const convId = first.body.data.conversation.id;
    const s1 = await stream(t.token);
    await s1.waitFor((e) => e.event === 'ready');
    await apiReply(convId, 'seen');
    const seen = await s1.waitFor((e) => messageContent(e) === 'seen');
    s1.close();
    await s1.ended;

    // While the window is away: replies, a visitor message from another tab, a close, a new conversation.
    await apiReply(convId, 'missed 1');
    await apiReply(convId, 'missed 2');
    await send(t.token, 'missed 3');
    await request(h.app).post(`/api/v1/conversations/${convId}/close`).set(bearer(h.site.key)).expect(200);
    await send(t.token, 'missed 4');

    const s2 = await stream(t.token, seen.id);
    await s2.waitFor((e) => messageContent(e) === 'missed 4', ARRIVAL_MS);
    expect(summary(s2.events)).toEqual([
      'message:missed 1',
      'message:missed 2',
      'message:missed 3',
      'conversation.closed',
      'conversation.started',
      'message:missed 4',
    ]);
    const ids = s2.events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);

    // Polling from the same id answers the same events.
    const poll = await request(h.app)
      .get(w(h.site.id, `/events/poll?lastEventId=${encodeURIComponent(seen.id!)}`))
      .set(auth(t.token));
    expect(poll.status).toBe(200);
    expect(poll.body.data.map((e: SseEvent) => e.id)).toEqual(s2.events.filter((e) => e.event !== 'ready').map((e) => e.id));
    expect(poll.body.hasMore).toBe(false);
    // And from its end, nothing until something happens.
    const quiet = await request(h.app)
      .get(w(h.site.id, `/events/poll?lastEventId=${encodeURIComponent(poll.body.lastEventId)}`))
      .set(auth(t.token));
    expect(quiet.body.data).toEqual([]);
  });

  test('messages written in the same millisecond are neither lost nor repeated across a resume', async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, 'base');
    const conv = first.body.data.conversation;
    const feed = h.runtime.services.window.feed;
    const tail = await feed.tail(h.site.id, t.visitorId);
    // Two messages at one millisecond; the one committed second sorts first by id, which a plain
    // (createdAt, id) cursor would skip.
    const at = Date.now() + 1000;
    const row = (id: string, content: string) => ({
      id,
      conversation_id: conv.id,
      site_id: h.site.id,
      direction: 'outgoing',
      origin: 'messenger',
      api_key_id: null,
      content,
      format: 'plain',
      created_at: at,
    });
    await h.runtime.db('messages').insert(row('msg_zzzzzzzzzzzzzzzzzzzzzzzzzz', 'later id'));
    const afterFirst = await feed.read(h.site.id, t.visitorId, tail, 100);
    expect(afterFirst.events.map((e) => messageContent(e as SseEvent))).toEqual(['later id']);
    await h.runtime.db('messages').insert(row('msg_00000000000000000000000000', 'earlier id'));
    const afterSecond = await feed.read(h.site.id, t.visitorId, afterFirst.position, 100);
    expect(afterSecond.events.map((e) => messageContent(e as SseEvent))).toEqual(['earlier id']);
    const nothing = await feed.read(h.site.id, t.visitorId, afterSecond.position, 100);
    expect(nothing.events).toEqual([]);
  });

  test("a Last-Event-ID of another visitor's conversation is refused", async () => {
    const victim = await getToken(h.app, h.site.id);
    const theirs = await send(victim.token, 'private');
    const t = await getToken(h.app, h.site.id);
    const s = await stream(t.token, `${theirs.body.data.conversation.id}.0.`);
    expect(s.status).toBe(400);
    await s.ended;
    const garbage = await stream(t.token, 'not an id');
    expect(garbage.status).toBe(400);
  });

  test('streams need a valid token, and one visitor holds at most five (the oldest goes)', async () => {
    const anonymous = await openSse(server, w(h.site.id, '/events'), {});
    streams.push(anonymous);
    expect(anonymous.status).toBe(401);
    const t = await getToken(h.app, h.site.id);
    const opened: SseStream[] = [];
    for (let i = 0; i < 5; i++) {
      const s = await stream(t.token);
      await s.waitFor((e) => e.event === 'ready');
      opened.push(s);
    }
    const sixth = await stream(t.token);
    await sixth.waitFor((e) => e.event === 'ready');
    await opened[0].ended;
    const first = await send(t.token, 'to all');
    expect(first.status).toBe(201);
    for (const s of [...opened.slice(1), sixth]) await s.waitFor((e) => messageContent(e) === 'to all', ARRIVAL_MS);
  });

  test.each([
    ['the process', { total: 2 }],
    ['one client IP (minting anonymous visitors does not reach the process limit)', { total: 100, perClientIp: 2 }],
  ])('%s holds a bounded number of streams: beyond it, 503 with Retry-After (the window polls)', async (_who, limits) => {
    const small = await listenWithLimits(limits);
    try {
      const tokens = await Promise.all([1, 2, 3].map(() => getToken(h.app, h.site.id)));
      const open = async (token: string) => {
        const s = await openSse(small, w(h.site.id, '/events'), { Authorization: `Bearer ${token}` });
        streams.push(s);
        return s;
      };
      const [a, b] = [await open(tokens[0].token), await open(tokens[1].token)];
      await a.waitFor((e) => e.event === 'ready');
      await b.waitFor((e) => e.event === 'ready');
      const third = await open(tokens[2].token);
      expect(third.status).toBe(503);
      expect(third.headers['retry-after']).toBe('10');
      a.close();
      await a.ended;
      // The slot frees when a stream goes.
      const deadline = Date.now() + ARRIVAL_MS;
      let again = await open(tokens[2].token);
      while (again.status === 503 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        again = await open(tokens[2].token);
      }
      expect(again.status).toBe(200);
    } finally {
      for (const s of streams.splice(0)) s.close();
      await small.close();
    }
  });

  test('a stream ends within a heartbeat of its visitor being revoked; other visitors keep theirs', async () => {
    const quick = await listenWithLimits({ heartbeatMs: 100 });
    try {
      const [revoked, kept] = await Promise.all([getToken(h.app, h.site.id), getToken(h.app, h.site.id)]);
      const open = async (token: string) => {
        const s = await openSse(quick, w(h.site.id, '/events'), { Authorization: `Bearer ${token}` });
        streams.push(s);
        await s.waitFor((e) => e.event === 'ready');
        return s;
      };
      const [gone, stays] = [await open(revoked.token), await open(kept.token)];
      await new Promise((r) => setTimeout(r, 2));
      await h.runtime.services.access.revokeVisitors(h.site.id, revoked.visitorId);
      await gone.waitFor((e) => e.event === 'token-expired', ARRIVAL_MS);
      await gone.ended;
      // Several heartbeats (each a check of the credential) later the other visitor's stream is still open and live.
      const beats = stays.pings;
      await waitFor('four more heartbeats on the kept stream', () => stays.pings >= beats + 4, ARRIVAL_MS);
      expect(stays.events.some((e) => e.event === 'token-expired')).toBe(false);
      expect((await send(kept.token, 'still here')).status).toBe(201);
      await stays.waitFor((e) => messageContent(e) === 'still here', ARRIVAL_MS);
    } finally {
      for (const s of streams.splice(0)) s.close();
      await quick.close();
    }
  });
});

describe('each event wakes only the streams of its own visitor', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('with other visitors streaming on the site, a message costs them no feed read, in this process or from another', async () => {
    const feed = h.runtime.services.window.feed;
    const events = h.runtime.services.stores.events;
    const [readFeed, recentEvents, recentEventCounts] = [feed.read, events.recentEvents, events.recentEventCounts];
    const reads = new Map<string, number>();
    feed.read = (siteId, visitorId, from, max) => {
      reads.set(visitorId, (reads.get(visitorId) ?? 0) + 1);
      return readFeed(siteId, visitorId, from, max);
    };
    // The sites the hub's poll has read the recent events of (a site's first look does), and its polls.
    const looked = new Set<string>();
    let polls = 0;
    events.recentEvents = async (siteIds, since) => {
      const found = await recentEvents(siteIds, since);
      for (const id of siteIds) looked.add(id);
      return found;
    };
    events.recentEventCounts = (siteIds, since) => {
      polls++;
      return recentEventCounts(siteIds, since);
    };
    const other: Runtime = await openRuntime(h.config);
    // Streams without a heartbeat within the test: only the hub's wake-ups bring events to them.
    const quiet = await listenWithLimits({ heartbeatMs: 3_600_000 });
    try {
      // A site of its own: its first look, which wakes every stream then open, is over before the others open theirs.
      const site = await h.newSite('Dispatch');
      await allowOrigins(h, site.id);
      const say = (token: string, content: string) =>
        request(h.app)
          .post(w(site.id, '/messages'))
          .set(auth(token))
          .send({ content, clientMessageId: `c-${Math.random().toString(36).slice(2)}` });
      const open = async (token: string) => {
        const s = await openSse(quiet, w(site.id, '/events'), { Authorization: `Bearer ${token}` });
        streams.push(s);
        await s.waitFor((e) => e.event === 'ready');
        return s;
      };
      const target = await getToken(h.app, site.id);
      const convId = (await say(target.token, 'mine')).body.data.conversation.id;
      const mine = await open(target.token);
      await waitFor("the hub's first look at the site", () => looked.has(site.id));
      // Twelve other visitors with a conversation each and a stream open.
      const others = await Promise.all(Array.from({ length: 12 }, () => getToken(h.app, site.id)));
      for (const o of others) expect((await say(o.token, 'hello')).status).toBe(201);
      const theirs = await Promise.all(others.map((o) => open(o.token)));
      reads.clear(); // each stream's first read is done: it is asked before the stream's `ready` is written
      const othersRead = () => others.reduce((sum, o) => sum + (reads.get(o.visitorId) ?? 0), 0);

      // This process: the commit's notice alone (the poll held) wakes the target's stream.
      await withPollHeld(async () => {
        const reply = await request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(site.key)).send({ content: 'to you alone' });
        expect(reply.status).toBe(201);
        await mine.waitFor((e) => messageContent(e) === 'to you alone', ARRIVAL_MS);
        expect((await say(target.token, 'and me again')).status).toBe(201);
        await mine.waitFor((e) => messageContent(e) === 'and me again', ARRIVAL_MS);
      });

      // Another process on the same database: no in-process notice, the poll finds it.
      await other.services.messages.reply(site.id, convId, {
        direction: 'outgoing',
        origin: 'messenger',
        apiKeyId: null,
        content: 'from elsewhere',
        format: 'plain',
        files: [],
      });
      await mine.waitFor((e) => messageContent(e) === 'from elsewhere', ARRIVAL_MS);
      await other.services.conversations.close(site.id, convId);
      await mine.waitFor((e) => e.event === 'conversation.closed', ARRIVAL_MS);
      // More polls: none of them wakes the others either.
      const pollsThen = polls;
      await waitFor('three more polls', () => polls >= pollsThen + 3, ARRIVAL_MS);
      process.stdout.write(`per-visitor dispatch: target reads ${reads.get(target.visitorId)}, others' reads ${othersRead()}\n`);
      expect(reads.get(target.visitorId)).toBeGreaterThanOrEqual(4);
      expect(othersRead()).toBe(0);
      for (const s of theirs) expect(summary(s.events)).toEqual([]);
    } finally {
      Object.assign(feed, { read: readFeed });
      Object.assign(events, { recentEvents, recentEventCounts });
      for (const s of streams.splice(0)) s.close();
      await quiet.close();
      await other.close();
    }
  });

  test("another process's events are read once a poll and routed by visitor; one whose visitor cannot be read wakes the whole site", async () => {
    const site = await h.newSite('Hub');
    const real = h.runtime.services.stores.events;
    const calls = { polls: 0, bodies: 0 };
    const store = {
      ...real,
      recentEventCounts(...args: Parameters<typeof real.recentEventCounts>) {
        calls.polls++;
        return real.recentEventCounts(...args);
      },
      visitorsOfEvents(ids: string[]) {
        calls.bodies += ids.length;
        return real.visitorsOfEvents(ids);
      },
    };
    let n = 0;
    const insert = (body: string) =>
      h.runtime
        .db('events')
        .insert({ id: `message.created:hubtest${site.id.slice(-8)}${n++}`, site_id: site.id, name: 'message.created', body, created_at: Date.now() });
    const visitorIs = (visitorId: string) => JSON.stringify({ data: { conversation: { visitorId } } });
    const until = async (what: () => boolean) => {
      const deadline = Date.now() + ARRIVAL_MS;
      while (!what() && Date.now() < deadline) await sleep(10);
      expect(what()).toBe(true);
    };
    await insert(visitorIs('bob')); // before anyone watched the site
    const hub = createLiveHub(store, { pollMs: 40 });
    const woken = new Map<string, number>();
    const wake = (who: string) => () => woken.set(who, (woken.get(who) ?? 0) + 1);
    const off = [hub.subscribe(site.id, 'ann', wake('ann')), hub.subscribe(site.id, 'bob', wake('bob')), hub.subscribe(site.id, 'bob', wake('bob2'))];
    try {
      // The first look at the site wakes its new streams once, reading no event body.
      await until(() => woken.get('ann') === 1 && woken.get('bob') === 1 && woken.get('bob2') === 1);
      expect(calls.bodies).toBe(0);
      woken.clear();
      await insert(visitorIs('bob'));
      await until(() => woken.get('bob') === 1 && woken.get('bob2') === 1);
      const pollsThen = calls.polls;
      await until(() => calls.polls >= pollsThen + 3);
      expect(Object.fromEntries(woken)).toEqual({ bob: 1, bob2: 1 }); // once, and never ann
      expect(calls.bodies).toBe(1);
      await insert('{not json');
      await until(() => woken.get('ann') === 1);
      expect(Object.fromEntries(woken)).toEqual({ ann: 1, bob: 2, bob2: 2 });
      // A commit of this process is told with its visitor: no read, the visitor's streams alone.
      hub.committed([{ kind: 'event', id: 'message.created:x', siteId: site.id, visitorId: 'ann', createdAt: Date.now() }]);
      expect(Object.fromEntries(woken)).toEqual({ ann: 2, bob: 2, bob2: 2 });
      expect(calls.bodies).toBe(2);
      // With many sites watched the count is asked across all sites: the same figures.
      const since = Date.now() - 10_000;
      expect((await real.recentEventCounts(null, since)).get(site.id)).toEqual((await real.recentEventCounts([site.id], since)).get(site.id));
      expect((await real.recentEventCounts(null, since)).get(site.id)?.count).toBe(3);
    } finally {
      for (const f of off) f();
    }
    expect(hub.watchedSites()).toBe(0);
  });

  test("a visitor's oldest stream ends only when the new one is accepted", async () => {
    const small = await listenWithLimits({ perVisitor: 1, perClientIp: 1, total: 100 });
    const open = async (token: string, localAddress: string) => {
      const s = await openSse(small, w(h.site.id, '/events'), { Authorization: `Bearer ${token}` }, { localAddress });
      streams.push(s);
      return s;
    };
    try {
      const [v, other] = [await getToken(h.app, h.site.id), await getToken(h.app, h.site.id)];
      const convId = (await send(v.token, 'first')).body.data.conversation.id;
      const full = await open(other.token, '127.0.0.2'); // the second address holds its one stream
      await full.waitFor((e) => e.event === 'ready');
      const kept = await open(v.token, '127.0.0.1');
      await kept.waitFor((e) => e.event === 'ready');

      const refused = await open(v.token, '127.0.0.2');
      expect(refused.status).toBe(503);
      await apiReply(convId, 'still here');
      await kept.waitFor((e) => messageContent(e) === 'still here', ARRIVAL_MS);

      // From its own address the new stream takes the place of the old one.
      const replacing = await open(v.token, '127.0.0.1');
      expect(replacing.status).toBe(200);
      await replacing.waitFor((e) => e.event === 'ready');
      await kept.ended;
    } finally {
      for (const s of streams.splice(0)) s.close();
      await small.close();
    }
  });
});
