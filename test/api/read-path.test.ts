/**
 * The read path's round trips (issue 8): one query for the key with its site and rights, one for the
 * page (the conversation check folded into it), attachments only for messages that have some, every
 * column named. And what the folding must keep: another site's conversation is 404, an existing
 * conversation's empty page is 200.
 */
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { migrationSource } from '../../server/db/migrations';
import { newId } from '../../server/platform/ids';
import { recountUncounted } from '../../server/db/migrations/036_attachment_count_unknown';
import { TEST_DB } from '../helpers/db';

/** SQLite keeps 005's default 0: one process writes the embedded database, so no older code writes beside it. */
const onMysql = TEST_DB === 'mysql' ? test : test.skip;
const messageRow = (id: string) => h.runtime.db('messages').where({ id }).first();

let h: Harness;
let convId: string;
let withFileId: string;
beforeAll(async () => {
  h = await createHarness();
  convId = (await h.visitorSay(h.site.id, 'v-read', 'first, no file')).conversation.id;
  const withFile = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-read', 'a photo', {
    files: [
      { buffer: Buffer.from('one'), originalName: 'a.txt', mimeType: 'text/plain' },
      { buffer: Buffer.from('two'), originalName: 'b.txt', mimeType: 'text/plain' },
    ],
  });
  withFileId = withFile.message.id;
  for (let i = 0; i < 30; i++) await h.visitorSay(h.site.id, 'v-read', `plain ${i}`);
});
afterAll(() => h.close());

const messagesUrl = (id: string) => `/api/v1/conversations/${id}/messages`;

/** The SQL one request sends, after a first identical request (the key's lastUsedAt write, warm caches). */
async function queriesOf(path: string, key = h.site.key) {
  await request(h.app).get(path).set(bearer(key));
  const sql: string[] = [];
  const listener = (q: { sql: string }) => sql.push(q.sql);
  h.runtime.db.on('query', listener);
  try {
    const res = await request(h.app).get(path).set(bearer(key));
    return { status: res.status, body: res.body, sql };
  } finally {
    h.runtime.db.off('query', listener);
  }
}

describe('round trips of a read', () => {
  test('a page of messages without files: the key, then the page', async () => {
    const r = await queriesOf(`${messagesUrl(convId)}?order=desc&limit=25`);
    expect(r.status).toBe(200);
    expect(r.body.data).toHaveLength(25);
    expect(r.body.data.every((m: { attachments: unknown[] }) => m.attachments.length === 0)).toBe(true);
    expect(r.sql).toHaveLength(2);
    expect(r.sql[0]).toMatch(/from [`"]api_keys[`"]/);
    expect(r.sql[1]).toMatch(/from [`"]messages[`"]/);
  });

  test('a page with a message that has files: one more query, for that message only', async () => {
    const r = await queriesOf(`${messagesUrl(convId)}?limit=5`);
    expect(r.status).toBe(200);
    expect(r.body.data.map((m: { attachments: { name: string }[] }) => m.attachments.map((a) => a.name))).toEqual([[], ['a.txt', 'b.txt'], [], [], []]);
    expect(r.sql).toHaveLength(3);
    expect(r.sql[2]).toMatch(/from [`"]attachments[`"] where [`"]message_id[`"] in \(\?\)/);
  });

  test('one conversation, and the list: the key, then one query', async () => {
    expect((await queriesOf(`/api/v1/conversations/${convId}`)).sql).toHaveLength(2);
    expect((await queriesOf('/api/v1/conversations?state=open&limit=10')).sql).toHaveLength(2);
  });

  test('every read names its columns', async () => {
    for (const path of [`${messagesUrl(convId)}?limit=5`, `/api/v1/conversations/${convId}`, '/api/v1/conversations']) {
      for (const sql of (await queriesOf(path)).sql) expect(sql).not.toMatch(/select \*/i);
    }
  });
});

describe('the conversation check folded into the page', () => {
  test("another site's conversation is 404, with or without a cursor made for it", async () => {
    const other = await h.newSite('Other site');
    const first = await request(h.app)
      .get(`${messagesUrl(convId)}?limit=2`)
      .set(bearer(h.site.key));
    for (const query of ['', `?cursor=${encodeURIComponent(first.body.page.nextCursor)}`]) {
      const res = await request(h.app)
        .get(messagesUrl(convId) + query)
        .set(bearer(other.key));
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
  });

  test('a missing conversation is 404 before a bad cursor is judged, as before', async () => {
    const res = await request(h.app)
      .get(`${messagesUrl(newId('conv'))}?cursor=bogus.cursor`)
      .set(bearer(h.site.key));
    expect(res.status).toBe(404);
  });

  test("an existing conversation's empty page is 200 with no data", async () => {
    const at = Date.now();
    const empty = {
      id: newId('conv', at),
      site_id: h.site.id,
      visitor_id: 'v-empty',
      state: 'closed',
      open_marker: null,
      created_at: at,
      updated_at: at,
      last_message_at: null,
      closed_at: at,
    };
    await h.runtime.db('conversations').insert(empty);
    const res = await request(h.app).get(messagesUrl(empty.id)).set(bearer(h.site.key));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], page: { nextCursor: null, hasMore: false } });
  });
});

describe('attachment_count', () => {
  test('is written with the message, in its transaction', async () => {
    const rows = await h.runtime.db('messages').where({ conversation_id: convId }).select('id', 'attachment_count');
    const counts = new Map(rows.map((r: { id: string; attachment_count: unknown }) => [r.id, Number(r.attachment_count)]));
    expect(counts.get(withFileId)).toBe(2);
    expect([...counts.values()].filter((n) => n > 0)).toEqual([2]);
  });

  onMysql('a message written without a count (by code older than 005, during a rolling upgrade) lists its files', async () => {
    // Migration 036 leaves such a row NULL, "not counted"; the default 0 of 005 hid its files.
    const { attachment_count: _counted, ...older } = await messageRow(withFileId);
    const olderId = newId('msg');
    await h.runtime.db('messages').insert({ ...older, id: olderId });
    expect((await messageRow(olderId)).attachment_count).toBeNull();
    await h.runtime.db('messages').where({ id: olderId }).del();
    await h.runtime.db('messages').where({ id: withFileId }).update({ attachment_count: null });
    try {
      const r = await queriesOf(`${messagesUrl(convId)}?limit=5`);
      expect(r.body.data.map((m: { attachments: { name: string }[] }) => m.attachments.map((a) => a.name))).toEqual([[], ['a.txt', 'b.txt'], [], [], []]);
      expect(r.sql).toHaveLength(3); // the same round trips as a counted message with files
      const none = await queriesOf(`${messagesUrl(convId)}?order=desc&limit=25`);
      expect(none.sql).toHaveLength(2); // pages without such a row still look nothing up
    } finally {
      await h.runtime.db('messages').where({ id: withFileId }).update({ attachment_count: 2 });
    }
  });

  test('migration 036 counts the files of messages an older instance wrote with 0', async () => {
    await h.runtime.db('messages').where({ id: withFileId }).update({ attachment_count: 0 });
    expect(await recountUncounted(h.runtime.db)).toBe(1);
    expect(Number((await messageRow(withFileId)).attachment_count)).toBe(2);
  });

  test('migration 005 counts the files of existing messages, and rolls back', async () => {
    const db = h.runtime.db;
    // By name: later migrations stay applied (005 is no longer the last one).
    await db.migrate.down({ migrationSource, name: '005_read_path' });
    expect(await db.schema.hasColumn('messages', 'attachment_count')).toBe(false);
    await db.migrate.latest({ migrationSource });
    const row = await db('messages').where({ id: withFileId }).first('attachment_count');
    expect(Number(row.attachment_count)).toBe(2);
    expect(Number((await db('messages').where('attachment_count', '>', 0).count({ n: '*' }).first())!.n)).toBe(1);
  });
});
