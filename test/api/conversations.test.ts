import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';

describe('listing, filters and paging', () => {
  let h: Harness;
  let now = Date.parse('2026-11-01T00:00:00.000Z');
  const ids: string[] = []; // in creation order
  const at = (i: number) => new Date(Date.parse('2026-11-01T00:00:00.000Z') + i * 60_000).toISOString();

  beforeAll(async () => {
    h = await createHarness({ now: () => now });
    // 30 conversations, one a minute; every third one closed a while later.
    for (let i = 0; i < 30; i++) {
      now = Date.parse(at(i));
      ids.push((await h.visitorSay(h.site.id, `v${i}`, `hello ${i}`)).conversation.id);
    }
    now = Date.parse(at(100));
    for (let i = 0; i < 30; i += 3) await h.runtime.services.conversations.close(h.site.id, ids[i]);
  });
  afterAll(() => h.close());

  const list = (query: string) => request(h.app).get(`/api/v1/conversations?${query}`).set(bearer(h.site.key));

  async function all(query: string): Promise<string[]> {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await list(`${query}&limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.data.map((c: { id: string }) => c.id));
      expect(res.body.page.hasMore).toBe(res.body.page.nextCursor !== null);
      cursor = res.body.page.nextCursor;
    } while (cursor);
    return seen;
  }

  test('newest first, every conversation once across pages', async () => {
    const seen = await all('');
    expect(seen).toEqual([...ids].reverse());
  });

  test('default page size is 25, the maximum 100', async () => {
    expect((await list('')).body.data).toHaveLength(25);
    expect((await list('limit=100')).body.data).toHaveLength(30);
    expect((await list('limit=101')).status).toBe(400);
  });

  test('state filter', async () => {
    const closed = await all('state=closed');
    expect(closed).toEqual(ids.filter((_, i) => i % 3 === 0).reverse());
    const open = await all('state=open');
    expect(open).toEqual(ids.filter((_, i) => i % 3 !== 0).reverse());
  });

  test('createdAfter is inclusive, createdBefore exclusive', async () => {
    const seen = await all(`createdAfter=${at(5)}&createdBefore=${at(10)}`);
    expect(seen).toEqual(ids.slice(5, 10).reverse());
  });

  test('updatedAfter / updatedBefore follow the last change', async () => {
    const recentlyUpdated = await all(`updatedAfter=${at(100)}`);
    expect(recentlyUpdated.sort()).toEqual(ids.filter((_, i) => i % 3 === 0).sort());
    const notSince = await all(`updatedBefore=${at(100)}&createdAfter=${at(20)}`);
    expect(notSince).toEqual(
      ids
        .slice(20)
        .filter((_, i) => (i + 20) % 3 !== 0)
        .reverse(),
    );
  });

  test('filters combine', async () => {
    const seen = await all(`state=open&createdAfter=${at(3)}&createdBefore=${at(9)}`);
    expect(seen).toEqual([ids[4], ids[5], ids[7], ids[8]].reverse());
  });

  test('a cursor used with other filters, or altered, is a 400', async () => {
    const first = await list('state=open&limit=2');
    const cursor = first.body.page.nextCursor as string;
    const other = await list(`state=closed&limit=2&cursor=${encodeURIComponent(cursor)}`);
    expect(other.status).toBe(400);
    expect(other.body.error.code).toBe('invalid_request');
    const tampered = cursor.slice(0, -2) + (cursor.endsWith('AA') ? 'BB' : 'AA');
    expect((await list(`state=open&cursor=${encodeURIComponent(tampered)}`)).status).toBe(400);
    expect((await list('cursor=garbage')).status).toBe(400);
    // the limit may change between pages
    expect((await list(`state=open&limit=5&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  test("a cursor of one site does not open another site's list", async () => {
    const first = await list('limit=1');
    const other = await h.newSite('Other');
    const res = await request(h.app)
      .get(`/api/v1/conversations?limit=1&cursor=${encodeURIComponent(first.body.page.nextCursor)}`)
      .set(bearer(other.key));
    expect(res.status).toBe(400);
  });

  test('bad filter values are 400 with details', async () => {
    for (const q of ['state=pending', 'createdAfter=yesterday', 'limit=abc', 'limit=-1', 'updatedBefore=2026-13-45T00:00:00Z', 'unknown=1']) {
      const res = await list(q);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.details.length).toBeGreaterThan(0);
    }
  });
});

describe('closing and the visitor writing again', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(() => h.close());

  const close = (id: string) => request(h.app).post(`/api/v1/conversations/${id}/close`).set(bearer(h.site.key));

  test('open -> closed once, with closedAt; closing again answers the same card and emits nothing', async () => {
    const { conversation } = await h.visitorSay(h.site.id, 'v-close', 'hi');
    expect(conversation.state).toBe('open');
    expect(conversation.closedAt).toBeNull();
    const first = await close(conversation.id);
    expect(first.status).toBe(200);
    expect(first.body.data.state).toBe('closed');
    expect(first.body.data.closedAt).toMatch(/Z$/);
    const again = await close(conversation.id);
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(first.body.data);
    const closedEvents = await h.runtime.db('events').where({ name: 'conversation.closed' });
    expect(closedEvents.filter((e) => JSON.parse(e.body).data.conversation.id === conversation.id)).toHaveLength(1);
  });

  test('concurrent closes emit exactly one conversation.closed', async () => {
    const { conversation } = await h.visitorSay(h.site.id, 'v-close-race', 'hi');
    const answers = await Promise.all(Array.from({ length: 10 }, () => close(conversation.id)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const closedEvents = (await h.runtime.db('events').where({ name: 'conversation.closed' })).filter(
      (e) => JSON.parse(e.body).data.conversation.id === conversation.id,
    );
    expect(closedEvents).toHaveLength(1);
  });

  test('a reply to a closed conversation is 409 conversation_closed', async () => {
    const { conversation } = await h.visitorSay(h.site.id, 'v-409', 'hi');
    await close(conversation.id);
    const res = await request(h.app).post(`/api/v1/conversations/${conversation.id}/messages`).set(bearer(h.site.key)).send({ content: 'too late' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conversation_closed');
  });

  test('after a close, simultaneous visitor messages start exactly one new conversation; the closed one stays closed', async () => {
    const { conversation: old } = await h.visitorSay(h.site.id, 'v-again', 'first');
    await close(old.id);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => h.visitorSay(h.site.id, 'v-again', `again ${i}`)));
    const newIds = new Set(results.map((r) => r.conversation.id));
    expect(newIds.size).toBe(1);
    expect(newIds.has(old.id)).toBe(false);
    expect(results.filter((r) => r.started)).toHaveLength(1);
    const oldCard = await request(h.app).get(`/api/v1/conversations/${old.id}`).set(bearer(h.site.key));
    expect(oldCard.body.data.state).toBe('closed');
    const fresh = [...newIds][0];
    const msgs = await request(h.app).get(`/api/v1/conversations/${fresh}/messages?limit=100`).set(bearer(h.site.key));
    expect(msgs.body.data).toHaveLength(8);
    const started = (await h.runtime.db('events').where({ name: 'conversation.started' })).filter((e) => JSON.parse(e.body).data.conversation.id === fresh);
    expect(started).toHaveLength(1);
  });

  test('50 different visitors writing their first message at once each get one conversation', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => h.visitorSay(h.site.id, `crowd-${i}`, `first ${i}`)));
    expect(new Set(results.map((r) => r.conversation.id)).size).toBe(50);
    expect(results.every((r) => r.started)).toBe(true);
  });

  test('a visitor writing while their conversation is being closed: no message lands in a closed conversation', async () => {
    for (let round = 0; round < 5; round++) {
      const { conversation } = await h.visitorSay(h.site.id, `v-close-write-${round}`, 'hi');
      const [, ...written] = await Promise.all([
        h.runtime.services.conversations.close(h.site.id, conversation.id),
        ...Array.from({ length: 4 }, (_, i) => h.visitorSay(h.site.id, `v-close-write-${round}`, `during ${i}`)),
      ]);
      const closedCard = await h.runtime.db('conversations').where({ id: conversation.id }).first();
      const late = await h.runtime.db('messages').where({ conversation_id: conversation.id }).andWhere('created_at', '>', Number(closedCard.closed_at));
      expect(late).toEqual([]);
      const elsewhere = new Set(written.map((w) => w.conversation.id).filter((id) => id !== conversation.id));
      expect(elsewhere.size).toBeLessThanOrEqual(1);
    }
  });

  test('visitor ids are compared byte for byte: "Bob" and "bob" are two visitors', async () => {
    const upper = await h.visitorSay(h.site.id, 'Bob', 'I am Bob');
    const lower = await h.visitorSay(h.site.id, 'bob', 'I am bob');
    expect(lower.conversation.id).not.toBe(upper.conversation.id);
    expect(lower.conversation.visitorId).toBe('bob');
  });

  test('a brand-new visitor writing several messages at once gets one conversation', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => h.visitorSay(h.site.id, 'v-burst', `m${i}`)));
    expect(new Set(results.map((r) => r.conversation.id)).size).toBe(1);
  });

  test('updatedAt and lastMessageAt follow messages; closedAt follows the close', async () => {
    const { conversation } = await h.visitorSay(h.site.id, 'v-times', 'hi');
    const reply = await request(h.app).post(`/api/v1/conversations/${conversation.id}/messages`).set(bearer(h.site.key)).send({ content: 'hello' });
    const card = await request(h.app).get(`/api/v1/conversations/${conversation.id}`).set(bearer(h.site.key));
    expect(card.body.data.lastMessageAt).toBe(reply.body.data.createdAt);
    expect(card.body.data.updatedAt).toBe(reply.body.data.createdAt);
    const closed = await close(conversation.id);
    expect(closed.body.data.updatedAt).toBe(closed.body.data.closedAt);
  });
});
