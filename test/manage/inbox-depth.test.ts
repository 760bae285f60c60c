/**
 * The inbox's filters page flat at depth, like the public list (test/api/list-depth.test.ts):
 * assignee=me/unassigned walk conversations_site_assignee_created as a range bounded at the cursor,
 * unread=true adds one primary-key look-up of the member's read mark per entry walked, nothing is
 * sorted, and on MariaDB a deep page reads about a page of index entries. Checked against OFFSET.
 */
import type { Knex } from 'knex';
import { createHarness, Harness } from '../helpers/harness';
import { captureOneQuery, entriesRead } from '../helpers/query-cost';
import { createConversationStore } from '../../server/conversations/store';
import type { ConversationFilter as ConversationFilters } from '../../server/conversations/filter';
import { dialectOf } from '../../server/db/knex';
import { newId } from '../../server/platform/ids';
import type { Position } from '../../server/platform/cursor';

const CONVERSATIONS = 3000;
const DEPTH = 800;
const MINUTE = 60_000;
const NOW = Date.parse('2026-11-20T00:00:00.000Z');
const ME = 'usr_00000000000000000000000001';
const OTHER = 'usr_00000000000000000000000002';
/** Entries MariaDB may read for a page of 26 at depth: the page and the entries a filter skips on the way. */
const MAX_ENTRIES_READ = 400;

let h: Harness;
let db: Knex;
let mysql: boolean;

beforeAll(async () => {
  h = await createHarness();
  db = h.runtime.db;
  mysql = dialectOf(db) === 'mysql';
  const rows = [];
  const reads = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    const created = NOW - (CONVERSATIONS - i) * MINUTE;
    const open = i % 7 !== 0;
    const assignee = i % 3 === 0 ? ME : i % 3 === 1 ? OTHER : null;
    const id = newId('conv', created);
    rows.push({
      id,
      site_id: h.site.id,
      visitor_id: `v${i}`,
      state: open ? 'open' : 'closed',
      open_marker: open ? 1 : null,
      created_at: created,
      updated_at: created + 5,
      last_message_at: created + 5,
      closed_at: open ? null : created + 5,
      assignee_id: assignee,
    });
    // Half read up to their last message, a few read before it.
    if (i % 2 === 0)
      reads.push({
        account_id: ME,
        conversation_id: id,
        site_id: h.site.id,
        last_read_at: i % 10 === 0 ? created : created + 5,
        last_read_message_id: null,
        updated_at: created,
      });
  }
  await db.batchInsert('conversations', rows, 100);
  await db.batchInsert('inbox_reads', reads, 100);
}, 120_000);
afterAll(() => h.close());

const cases: { name: string; filters: ConversationFilters; index: string }[] = [
  { name: 'assignee=me', filters: { assigneeId: ME }, index: 'conversations_site_assignee_created' },
  { name: 'assignee=unassigned', filters: { assigneeId: null }, index: 'conversations_site_assignee_created' },
  { name: 'assignee=me&state=open', filters: { assigneeId: ME, state: 'open' }, index: 'conversations_site_assignee_created' },
  { name: 'unread=true', filters: { unreadFor: ME }, index: 'conversations_site_created_updated' },
  { name: 'unread=true&state=open', filters: { unreadFor: ME, state: 'open' }, index: 'conversations_site_state_created_updated' },
  { name: 'assignee=unassigned&unread=true', filters: { assigneeId: null, unreadFor: ME }, index: 'conversations_site_assignee_created' },
  {
    name: 'assignee=me&unread=true&updatedAfter',
    filters: { assigneeId: ME, unreadFor: ME, updatedAfter: NOW - 2500 * MINUTE },
    index: 'conversations_site_assignee_created',
  },
];

describe.each(cases)('inbox, $name', ({ filters, index }) => {
  /** The same filter by OFFSET, for comparison. */
  const byOffset = async () => {
    const q = db('conversations as c')
      .leftJoin('inbox_reads as r', (j) => j.on('r.conversation_id', '=', 'c.id').andOn('r.account_id', '=', db.raw('?', [ME])))
      .where('c.site_id', h.site.id);
    if (filters.assigneeId === null) q.whereNull('c.assignee_id');
    else if (filters.assigneeId !== undefined) q.andWhere('c.assignee_id', filters.assigneeId);
    if (filters.state) q.andWhere('c.state', filters.state);
    if (filters.updatedAfter !== undefined) q.andWhere('c.updated_at', '>=', filters.updatedAfter);
    if (filters.unreadFor) q.andWhere((w) => w.whereNull('r.last_read_at').orWhere('c.last_message_at', '>', db.ref('r.last_read_at')));
    return (await q
      .orderBy([
        { column: 'c.created_at', order: 'desc' },
        { column: 'c.id', order: 'desc' },
      ])
      .pluck('c.id')) as string[];
  };

  test('page 1 and a deep page walk the index as a range, without sorting, and agree with OFFSET paging', async () => {
    const all = await byOffset();
    const depth = Math.min(DEPTH, all.length - 27);
    expect(depth).toBeGreaterThan(300);
    const row = await db('conversations')
      .where({ id: all[depth - 1] })
      .first('created_at', 'id');
    const deep: Position = { createdAt: Number(row.created_at), id: row.id };
    for (const after of [undefined, deep]) {
      const { result, query } = await captureOneQuery(db, () => createConversationStore(db).list(h.site.id, filters, after, 26));
      expect(result.map((r) => r.id)).toEqual(all.slice(after ? depth : 0, (after ? depth : 0) + 26));
      if (mysql) {
        const [rows] = await db.raw(`EXPLAIN ${query.sql}`, query.bindings as Knex.RawBinding[]);
        const conv = rows.find((r: { table: string }) => r.table === 'conversations');
        expect(conv).toMatchObject({ key: index });
        expect(conv.type).toMatch(after ? /^range$/ : /^(ref|range|ref_or_null)$/);
        for (const r of rows) expect(r.Extra ?? '').not.toMatch(/filesort|temporary/i);
        const reads = rows.find((r: { table: string }) => r.table === 'inbox_reads');
        if (filters.unreadFor) expect(reads).toMatchObject({ type: 'eq_ref', key: 'PRIMARY' });
        if (after) expect(await entriesRead(db, query)).toBeLessThanOrEqual(MAX_ENTRIES_READ);
      } else {
        const lines = (await db.raw(`EXPLAIN QUERY PLAN ${query.sql}`, query.bindings as Knex.RawBinding[]))
          .map((r: { detail: string }) => r.detail)
          .join('\n');
        expect(lines).toMatch(new RegExp(`SEARCH conversations USING INDEX ${index}`));
        if (filters.unreadFor) expect(lines).toMatch(/SEARCH inbox_reads USING INDEX sqlite_autoindex_inbox_reads_1|SEARCH inbox_reads USING PRIMARY KEY/);
        expect(lines).not.toMatch(/TEMP B-TREE/);
      }
    }
  });
});

describe('unread counts of a page', () => {
  const LONG = 3000;
  const ids = { nearEnd: '', never: '', read: '' };

  beforeAll(async () => {
    const conversation = (n: number) => {
      const created = NOW - (10_000 + n) * MINUTE;
      const id = newId('conv', created);
      return {
        id,
        row: {
          id,
          site_id: h.site.id,
          visitor_id: `long${n}`,
          state: 'closed',
          open_marker: null,
          created_at: created,
          updated_at: created,
          last_message_at: created + LONG,
          closed_at: created + LONG,
        },
      };
    };
    const made = [conversation(1), conversation(2), conversation(3)];
    [ids.nearEnd, ids.never, ids.read] = made.map((m) => m.id);
    await db.batchInsert(
      'conversations',
      made.map((m) => m.row),
      10,
    );
    const messages = [];
    for (const { id, row } of made) {
      for (let i = 1; i <= LONG; i++) {
        // The last 10 of each: 4 written by the member (never unread for them), 6 by the visitor.
        const mine = i > LONG - 10 && i % 3 === 0;
        messages.push({
          id: newId('msg', row.created_at + i),
          conversation_id: id,
          site_id: h.site.id,
          direction: mine ? 'outgoing' : 'incoming',
          origin: mine ? 'messenger' : 'widget',
          author_id: mine ? ME : null,
          content: 'x',
          format: 'text',
          created_at: row.created_at + i,
        });
      }
    }
    await db.batchInsert('messages', messages, 500);
    const mark = (id: string, at: number) => ({
      account_id: ME,
      conversation_id: id,
      site_id: h.site.id,
      last_read_at: at,
      last_read_message_id: null,
      updated_at: at,
    });
    const created = (id: string) => made.find((m) => m.id === id)!.row.created_at;
    await db('inbox_reads').insert([mark(ids.nearEnd, created(ids.nearEnd) + LONG - 10), mark(ids.read, created(ids.read) + LONG)]);
  }, 120_000);

  test('start at each read mark and stop at the cap: a long history is not read again on every page', async () => {
    const { createInboxStore, UNREAD_COUNT_CAP } = await import('../../server/inbox/store');
    const store = createInboxStore(db);
    const list = [ids.nearEnd, ids.never, ids.read];
    const marks = new Map(
      (await db('inbox_reads').where('account_id', ME).whereIn('conversation_id', list).select('conversation_id', 'last_read_at')).map(
        (r: { conversation_id: string; last_read_at: unknown }) => [r.conversation_id, Number(r.last_read_at)],
      ),
    );
    const { result, query } = await captureOneQuery(db, () => store.unreadCounts(ME, list, marks));
    // Near the end: the visitor's 6 of the last 10 (the member's own 4 never count). Never read: the cap. Read: none.
    // A conversation with nothing unread has no entry (the service reads it as 0).
    expect(Object.fromEntries(result)).toEqual({ [ids.nearEnd]: 6, [ids.never]: UNREAD_COUNT_CAP });
    if (mysql) {
      // The three ranges: about 10, the cap, and none, far from the 3 x 3,000 messages there are.
      expect(await entriesRead(db, query)).toBeLessThanOrEqual(UNREAD_COUNT_CAP + 50);
    }
  });
});
