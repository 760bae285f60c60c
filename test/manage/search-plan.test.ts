/**
 * The search's plan (server/search/plan.ts) on sites larger than its first window, over /manage/v1
 * on a real database: pages are exact (every match once, newest first) whatever the page size, so
 * page boundaries fall inside windows, on a window's lower end and where the walk hands over to
 * the full-text index; the other filters combine; the walk tests an entry as the full-text index
 * matches it; and a page costs a bounded number of statements and index entries however large the
 * site (counted, never timed).
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { entriesRead, type CapturedQuery } from '../helpers/query-cost';
import { M, manageHarness, newMember, signIn } from './helpers';
import { newId } from '../../server/platform/ids';
import { dialectOf } from '../../server/db/knex';
import { FIRST_WINDOW } from '../../server/search/plan';
import { createSearchStore } from '../../server/search/store';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';

const N = 400;
const W = FIRST_WINDOW;
const BIG = 3000;
const T0 = Date.UTC(2026, 0, 1);

let h: Harness;
let agent: { id: string; cookie: string };
let small: { siteId: string; ids: string[]; tagId: string };
let big: { siteId: string; ids: string[]; tagId: string };

/** Which words an entry of the conversation at `p` (0 the newest) holds. */
function wordsAt(p: number): string[] {
  const words = [];
  if (p % 2 === 0) words.push('halfword');
  // Around the first window's lower end (W - 1 is the last conversation in it).
  if ([W - 1, W, W + 1, 2 * W - 1, 2 * W, 300, 399].includes(p)) words.push('edgeword');
  // Two in the first window, then one in a second window (a page of 3), or the index (a page of 25).
  if ([0, 40, W + 62, 300, 350, 399].includes(p)) words.push('pairword');
  if (p >= 300) words.push('oldword');
  return words;
}
const closedAt = (p: number) => p % 3 === 0;
const taggedAt = (p: number) => p % 5 === 0;
const assignedAt = (p: number) => p % 7 === 0;
const readAt = (p: number) => p % 4 === 0;

/** A site of `count` conversations, one a second, each with a card and two message entries (one with its words), inserted in bulk. */
async function makeSite(count: number) {
  const site = await h.newSite(`plan ${count}`);
  const db = h.runtime.db;
  const tagId = `tag_${newId('note', T0).slice('note_'.length)}`;
  await db('tags').insert({ id: tagId, site_id: site.id, name: 'Plan', name_key: `plan${count}`, created_at: T0 });
  const ids: string[] = [];
  const conversations = [];
  const entries = [];
  const tags = [];
  const reads = [];
  for (let p = count - 1; p >= 0; p--) {
    const at = T0 + (count - p) * 1000;
    const id = newId('conv', at);
    ids[p] = id;
    const closed = closedAt(p);
    conversations.push({
      id,
      site_id: site.id,
      visitor_id: `vis_plan_${count}_${p}`,
      state: closed ? 'closed' : 'open',
      open_marker: closed ? null : 1,
      created_at: at,
      updated_at: at + 10,
      last_message_at: at + 10,
      closed_at: closed ? at + 10 : null,
      assignee_id: assignedAt(p) ? agent.id : null,
    });
    const words = wordsAt(p);
    const row = (kind: string, sourceId: string, body: string) => ({ site_id: site.id, conversation_id: id, kind, source_id: sourceId, body, created_at: at });
    entries.push(row('card', id, `${id} vis_plan_${count}_${p}`));
    entries.push(row('message', newId('msg', at), `Hello, a filler message (number ${p}).`));
    entries.push(row('message', newId('msg', at + 1), words.length ? `Re: (${words.join(') — ')}) see the order` : 'nothing to see'));
    if (taggedAt(p)) tags.push({ conversation_id: id, tag_id: tagId, site_id: site.id, created_at: at });
    if (readAt(p))
      reads.push({ account_id: agent.id, conversation_id: id, site_id: site.id, last_read_at: at + 10, last_read_message_id: null, updated_at: at + 10 });
  }
  for (const [table, rows] of [
    ['conversations', conversations],
    ['search_entries', entries],
    ['conversation_tags', tags],
    ['inbox_reads', reads],
  ] as const) {
    for (let i = 0; i < rows.length; i += 500) await db(table).insert(rows.slice(i, i + 500));
  }
  return { siteId: site.id, ids, tagId };
}

beforeAll(async () => {
  h = await manageHarness({ limiter: createMemoryLimiter(1_000_000) });
  agent = { id: (await newMember(h, h.site.id, 'plan-agent@example.com', 'agent')).id, cookie: '' };
  small = await makeSite(N);
  big = await makeSite(BIG);
  for (const s of [small, big]) await h.runtime.db('memberships').insert({ account_id: agent.id, site_id: s.siteId, role: 'agent', created_at: T0 });
  agent.cookie = (await signIn(h, 'plan-agent@example.com')).cookie;
}, 120_000);
afterAll(() => h.close());

const ids = (res: request.Response) => (res.body.data as { id: string }[]).map((c) => c.id);

/** Every page of a search, followed by its cursor; answers the ids in order and the page count. */
async function allPages(siteId: string, query: string, limit: number) {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res: request.Response = await request(h.app)
      .get(`${M}/sites/${siteId}/inbox/conversations?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      .set('Cookie', agent.cookie);
    expect(res.status).toBe(200);
    seen.push(...ids(res));
    cursor = res.body.page.nextCursor;
    pages++;
  } while (cursor && pages <= N);
  return { seen, pages };
}

/** The ids a query must give, newest first, computed from the rules the site was made by. */
function expected(site: { ids: string[] }, word: string, keep: (p: number) => boolean = () => true) {
  return site.ids.filter((_, p) => wordsAt(p).includes(word) && keep(p));
}

test('pages are exact whatever their size: boundaries inside a window, on its lower end, and where the index takes over', async () => {
  for (const word of ['edgeword', 'pairword', 'oldword', 'halfword']) {
    const want = expected(small, word);
    for (const limit of word === 'halfword' ? [7, 25, 100] : [1, 2, 3, 25]) {
      const { seen, pages } = await allPages(small.siteId, `q=${word}`, limit);
      expect({ word, limit, seen }).toEqual({ word, limit, seen: want });
      expect(pages).toBe(Math.max(1, Math.ceil(want.length / limit)));
    }
  }
  expect((await allPages(small.siteId, 'q=noneword', 25)).seen).toEqual([]);
});

test('the other filters combine with the walk and with the index', async () => {
  const cases: [string, (p: number) => boolean][] = [
    ['state=open', (p) => !closedAt(p)],
    ['state=closed', closedAt],
    ['assignee=me', assignedAt],
    ['assignee=unassigned&state=open', (p) => !assignedAt(p) && !closedAt(p)],
    ['unread=true', (p) => !readAt(p)],
    [`tag=${small.tagId}`, taggedAt],
    [`tag=${small.tagId}&state=open&unread=true`, (p) => taggedAt(p) && !closedAt(p) && !readAt(p)],
  ];
  for (const [filters, keep] of cases) {
    for (const word of ['halfword', 'pairword', 'edgeword']) {
      for (const limit of [2, 25]) {
        const { seen } = await allPages(small.siteId, `q=${word}&${filters}`, limit);
        expect({ filters, word, limit, seen }).toEqual({ filters, word, limit, seen: expected(small, word, keep) });
      }
    }
  }
});

test("the walk's test of an entry finds what the full-text index finds", async () => {
  const db = h.runtime.db;
  const search = createSearchStore(db);
  const site = await h.newSite('semantics');
  const bodies = [
    'Where is my parcel? Ordered the Crème brûlée set',
    'die Straße entlang',
    'Œuvre complète',
    "don't stop",
    'order_x and co-operate',
    'ORDERED #1234 (reorder)',
    `a ${'z'.repeat(90)} token`,
    'bob@example.com wrote: 注文番号 заказ',
    'e\u0301te\u0301 and naïve',
  ];
  const conversationIds: string[] = [];
  for (const [i, body] of bodies.entries()) {
    const id = newId('conv', T0 + i);
    conversationIds.push(id);
    await db('conversations').insert({
      id,
      site_id: site.id,
      visitor_id: `vis_sem_${i}`,
      state: 'open',
      open_marker: 1,
      created_at: T0 + i,
      updated_at: T0 + i,
    });
    await db('search_entries').insert({ site_id: site.id, conversation_id: id, kind: 'message', source_id: newId('msg', T0 + i), body, created_at: T0 + i });
  }
  const queries = [
    ['parcel'],
    ['creme', 'brulee'],
    ['strasse'],
    ['straße'],
    ['oeuvre'],
    ['don'],
    ['order'],
    ['reorder'],
    ['rder'],
    ['ordered', '1234'],
    ['zzz'],
    ['example'],
    ['注文番号'],
    ['зак'],
    ['naive'],
    ['operate'],
    ['order_x'],
  ];
  for (const words of queries) {
    const byIndex: string[] = await db('conversations').whereIn('id', search.matchingConversations(site.id, words)).orderBy('id').pluck('id');
    const byWalk: string[] = await db('conversations').where('site_id', site.id).whereExists(search.conversationHasEntry(words)).orderBy('id').pluck('id');
    expect({ words, byWalk }).toEqual({ words, byWalk: byIndex });
  }
  // The cases above are not vacuous: the index finds some and misses others.
  const found = (words: string[]) => db('conversations').whereIn('id', search.matchingConversations(site.id, words)).pluck('id');
  expect(await found(['parcel'])).toEqual([conversationIds[0]]);
  expect(await found(['rder'])).toEqual([]);
});

/** The statements on `conversations` one request sent (a search's steps), with their values. */
async function listStatements(siteId: string, query: string): Promise<CapturedQuery[]> {
  const seen: CapturedQuery[] = [];
  const listener = (q: CapturedQuery) => seen.push({ sql: q.sql, bindings: q.bindings });
  h.runtime.db.on('query', listener);
  try {
    const res = await request(h.app).get(`${M}/sites/${siteId}/inbox/conversations?${query}`).set('Cookie', agent.cookie);
    expect(res.status).toBe(200);
  } finally {
    h.runtime.db.off('query', listener);
  }
  return seen.filter((q) => /from [`"]conversations[`"]/i.test(q.sql));
}

test('a page costs the same bounded steps on a large site as on a small one: a common word one window, an unmatched word one window and the index', async () => {
  const mysql = dialectOf(h.runtime.db) === 'mysql';
  for (const [word, walked] of [
    ['halfword', 1],
    ['noneword', 1],
    ['oldword', 1],
  ] as const) {
    const costs = [];
    for (const site of [small, big]) {
      const statements = await listStatements(site.siteId, `q=${word}`);
      // Each window is its lower end and its matches, then the index if the page is not full.
      const windows = walked;
      const full = word === 'halfword';
      expect({ word, statements: statements.length }).toEqual({ word, statements: 2 * windows + (full ? 0 : 1) });
      if (mysql) {
        let walkEntries = 0;
        for (const s of statements.slice(0, 2 * windows)) walkEntries += await entriesRead(h.runtime.db, s);
        costs.push(walkEntries);
      }
    }
    if (mysql) {
      // The walk reads the window's index entries and its conversations' entries: not the site's.
      expect({ word, big: costs[1] }).toEqual({ word, big: costs[0] });
      expect(costs[1]).toBeLessThanOrEqual(FIRST_WINDOW * 8);
    }
  }
  // Every page of a common word on the large site: the same two statements each.
  let cursor: string | null = null;
  for (let page = 0; page < 5; page++) {
    const statements = await listStatements(big.siteId, `q=halfword&limit=25${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(statements).toHaveLength(2);
    const res: request.Response = await request(h.app)
      .get(`${M}/sites/${big.siteId}/inbox/conversations?q=halfword&limit=25${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      .set('Cookie', agent.cookie);
    expect(ids(res)).toEqual(expected(big, 'halfword').slice(page * 25, page * 25 + 25));
    cursor = res.body.page.nextCursor;
  }
});
