/**
 * Keyset paging stays flat with depth for every filter combination of GET /conversations (issue 8),
 * and for the messages of a long conversation in both orders. Asserted on the plan, not on time:
 * the query walks an index that starts with site_id (and state when filtered) as a range bounded at
 * the cursor, never sorts, and on MariaDB reads about one page of index entries at depth 1,500 (the
 * engine's own Handler_read / ICP counters). Every deep page is also checked against OFFSET paging.
 */
import type { Knex } from 'knex';
import { createHarness, Harness } from '../helpers/harness';
import { captureOneQuery, CapturedQuery, entriesRead } from '../helpers/query-cost';
import { createConversationStore } from '../../server/conversations/store';
import type { ConversationFilter as ConversationFilters } from '../../server/conversations/filter';
import { createMessageStore } from '../../server/messages/store';
import { dialectOf } from '../../server/db/knex';
import { newId } from '../../server/platform/ids';
import type { Position } from '../../server/platform/cursor';

const CONVERSATIONS = 3000;
const DEPTH = 1500;
const MINUTE = 60_000;
const NOW = Date.parse('2026-11-20T00:00:00.000Z');
/** Index entries MariaDB may read for a page of 25 (+1) at depth: the page, plus the non-matching entries an updated* filter skips. */
const MAX_ENTRIES_READ = 200;

let h: Harness;
let db: Knex;
let mysql: boolean;
let seed = 7;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;

beforeAll(async () => {
  h = await createHarness();
  db = h.runtime.db;
  mysql = dialectOf(db) === 'mysql';
  const other = await h.newSite('Neighbour');
  const rows = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    // Recent conversations mostly open, old ones mostly closed; most live minutes, some days.
    const created = NOW - (CONVERSATIONS - i) * MINUTE;
    const open = random() < (CONVERSATIONS - i <= 1000 ? 0.95 : 0.03);
    const life = random() < 0.9 ? Math.floor(random() * 20 * MINUTE) : Math.floor(random() * 3000 * MINUTE);
    const updated = Math.min(NOW, created + life);
    const site = i % 5 === 4 ? other.id : h.site.id;
    rows.push({
      id: newId('conv', created),
      site_id: site,
      visitor_id: `v${i}`,
      state: open ? 'open' : 'closed',
      open_marker: open ? 1 : null,
      created_at: created,
      updated_at: updated,
      last_message_at: updated,
      closed_at: open ? null : updated,
    });
  }
  await db.batchInsert('conversations', rows, 100);
}, 120_000);
afterAll(() => h.close());

/** The plan of `query`: MariaDB's EXPLAIN row, or SQLite's EXPLAIN QUERY PLAN lines. */
async function plan(query: CapturedQuery): Promise<{ key?: string; type?: string; extra?: string; lines: string[] }> {
  if (mysql) {
    const [rows] = await db.raw(`EXPLAIN ${query.sql}`, query.bindings as Knex.RawBinding[]);
    expect(rows).toHaveLength(1);
    return { key: rows[0].key, type: rows[0].type, extra: rows[0].Extra ?? '', lines: [] };
  }
  const rows = await db.raw(`EXPLAIN QUERY PLAN ${query.sql}`, query.bindings as Knex.RawBinding[]);
  return { lines: rows.map((r: { detail: string }) => r.detail) };
}

const filterCombinations = (): { name: string; filters: ConversationFilters }[] => {
  const created = [
    {},
    { createdAfter: NOW - 2800 * MINUTE },
    { createdBefore: NOW - 100 * MINUTE },
    { createdAfter: NOW - 2800 * MINUTE, createdBefore: NOW - 100 * MINUTE },
  ];
  const updated = [
    {},
    { updatedAfter: NOW - 2900 * MINUTE },
    { updatedBefore: NOW - 200 * MINUTE },
    { updatedAfter: NOW - 2900 * MINUTE, updatedBefore: NOW - 200 * MINUTE },
  ];
  const out = [];
  for (const state of [undefined, 'open', 'closed'] as const)
    for (const c of created)
      for (const u of updated) {
        const filters: ConversationFilters = { ...(state ? { state } : {}), ...c, ...u };
        out.push({
          name:
            Object.keys(filters)
              .map((k) => (k === 'state' ? `state=${state}` : k))
              .join('&') || 'no filter',
          filters,
        });
      }
  return out;
};

describe.each(filterCombinations())('conversations, $name', ({ filters }) => {
  const store = () => createConversationStore(db);
  const byOffset = (offset: number, limit: number) => {
    const q = db('conversations').where('site_id', h.site.id);
    if (filters.state) q.andWhere('state', filters.state);
    if (filters.createdAfter !== undefined) q.andWhere('created_at', '>=', filters.createdAfter);
    if (filters.createdBefore !== undefined) q.andWhere('created_at', '<', filters.createdBefore);
    if (filters.updatedAfter !== undefined) q.andWhere('updated_at', '>=', filters.updatedAfter);
    if (filters.updatedBefore !== undefined) q.andWhere('updated_at', '<', filters.updatedBefore);
    return q
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .offset(offset)
      .limit(limit)
      .pluck('id');
  };
  const index = filters.state ? 'conversations_site_state_created_updated' : 'conversations_site_created_updated';
  const columns = filters.state ? 'site_id=? AND state=?' : 'site_id=?';

  test('page 1 and a page deep down walk the index as a range, without sorting, and agree with OFFSET paging', async () => {
    const all = (await byOffset(0, CONVERSATIONS)) as string[];
    const depth = Math.min(DEPTH, all.length - 27);
    expect(depth).toBeGreaterThan(400); // the data make every combination deep
    const positionRow = await db('conversations')
      .where({ id: all[depth - 1] })
      .first('created_at', 'id');
    const deep: Position = { createdAt: Number(positionRow.created_at), id: positionRow.id };

    for (const after of [undefined, deep]) {
      const { result, query } = await captureOneQuery(db, () => store().list(h.site.id, filters, after, 26));
      expect(result.map((r) => r.id)).toEqual(all.slice(after ? depth : 0, (after ? depth : 0) + 26));
      const p = await plan(query);
      if (mysql) {
        // Page 1 with no time range may walk the equality prefix (`ref`); below a cursor it is a range.
        expect(p).toMatchObject({ key: index, type: after ? 'range' : expect.stringMatching(/^(ref|range)$/) });
        expect(p.extra).not.toMatch(/filesort|temporary/i);
        if (after) expect(await entriesRead(db, query)).toBeLessThanOrEqual(MAX_ENTRIES_READ);
      } else {
        expect(p.lines).toHaveLength(1);
        // With a cursor the range has its upper end on created_at: the scan starts at the cursor.
        expect(p.lines[0]).toMatch(
          new RegExp(`^SEARCH conversations USING INDEX ${index} \\(${columns.replace(/\?/g, '\\?')}${after ? ' AND created_at[<>]' : ''}`),
        );
        expect(p.lines.join('\n')).not.toMatch(/TEMP B-TREE/);
      }
    }
  });
});

describe('messages of a long conversation', () => {
  let conversationId: string;
  const MESSAGES = 3000;
  beforeAll(async () => {
    const start = await h.visitorSay(h.site.id, 'v-long', 'm0');
    conversationId = start.conversation.id;
    const rows = Array.from({ length: MESSAGES }, (_, i) => ({
      id: newId('msg', NOW + i * 1000),
      conversation_id: conversationId,
      site_id: h.site.id,
      direction: 'incoming',
      origin: 'widget',
      api_key_id: null,
      content: `m${i + 1}`,
      format: 'plain',
      created_at: NOW + i * 1000,
    }));
    await db.batchInsert('messages', rows, 100);
  }, 120_000);

  test.each(['asc', 'desc'] as const)('a page at depth %s walks messages_conversation_created as a range', async (order) => {
    const ids = (await db('messages')
      .where({ conversation_id: conversationId })
      .orderBy([
        { column: 'created_at', order },
        { column: 'id', order },
      ])
      .pluck('id')) as string[];
    const positionRow = await db('messages')
      .where({ id: ids[DEPTH - 1] })
      .first('created_at', 'id');
    const after: Position = { createdAt: Number(positionRow.created_at), id: positionRow.id };
    const { result, query } = await captureOneQuery(db, () => createMessageStore(db).page(h.site.id, conversationId, order, after, 26));
    expect(result.map((r) => r.id)).toEqual(ids.slice(DEPTH, DEPTH + 26));
    const p = await plan(query);
    if (mysql) {
      expect(p).toMatchObject({ key: 'messages_conversation_created', type: 'range' });
      expect(p.extra).not.toMatch(/filesort|temporary/i);
      expect(await entriesRead(db, query)).toBeLessThanOrEqual(30);
    } else {
      expect(p.lines).toEqual([expect.stringMatching(/^SEARCH messages USING INDEX messages_conversation_created \(conversation_id=\? AND created_at[<>]/)]);
    }
  });
});
