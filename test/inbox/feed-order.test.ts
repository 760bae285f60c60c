/**
 * The inbox feed stays gap-free while writers of one site overlap (server/inbox/store.ts): a
 * position taken by a transaction that has not committed is never passed by a reader, because a
 * second writer of the site cannot commit a higher position before it. And what a reply with an
 * Idempotency-Key sends: its record is completed once, in the reply's own transaction, and the
 * site's event address comes with the conversation's lock, not from a read of its own.
 */
import request from 'supertest';
import type { Knex } from 'knex';
import { createHarness, Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { createInboxStore, InboxStore } from '../../server/inbox/store';
import { runInTransaction } from '../../server/db/transaction';
import { TEST_DB } from '../helpers/db';
import { webhooks } from '../webhooks/helpers';

let h: Harness;
let db: Knex;
let store: InboxStore;

beforeAll(async () => {
  h = await createHarness();
  db = h.runtime.db;
  store = createInboxStore(db);
}, 60_000);
afterAll(() => h.close());

/** A statement as its verb and the table it is about (`select conversations`); a subquery's table is not named. */
function statementKind(sql: string): string {
  const verb = /^\s*(\w+)/.exec(sql)![1].toLowerCase();
  if (verb === 'begin' || verb === 'commit') return verb;
  const table = (verb === 'select' ? /\bfrom\s+[`"](\w+)[`"]/i : /^\s*(?:insert\s+into|update|delete\s+from)\s+[`"](\w+)[`"]/i).exec(sql)?.[1];
  return `${verb} ${table ?? sql}`;
}

const feedRow = (siteId: string, kind: string) => ({
  site_id: siteId,
  kind,
  conversation_id: null,
  event_id: null,
  account_id: null,
  body: JSON.stringify({ kind }),
  created_at: Date.now(),
});

/**
 * Statements of this test's database now running in MariaDB whose text contains `table` (a writer
 * blocked on a lock), this one left out: its own text names the table too.
 */
async function waitingOn(table: string): Promise<number> {
  const [rows] = await db.raw(
    "SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND command = 'Query' AND id <> CONNECTION_ID() AND info LIKE ?",
    [`%${table}%`],
  );
  return Number(rows[0].n);
}

// SQLite has one writer at a time (and the service one connection): nothing can interleave there.
const onMariaDb = TEST_DB === 'mysql' ? test : test.skip;

onMariaDb('two writers of one site committing out of order: a reader between them sees neither position, then both in order', async () => {
  const site = (await h.newSite('feed order')).id;
  // The site's first change makes its counter row, so both writers below bump an existing row.
  await runInTransaction(db, (trx) => store.append(trx, feedRow(site, 'test.setup')));
  const start = await store.tail(site);

  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let firstTook!: (position: number) => void;
  const firstPosition = new Promise<number>((resolve) => (firstTook = resolve));
  // The first writer takes its position and then stays open (a slow transaction).
  const first = runInTransaction(db, async (trx) => {
    const position = await store.append(trx, feedRow(site, 'test.first'));
    firstTook(position);
    await held;
    return position;
  });
  expect(await firstPosition).toBe(start + 1);

  // The second writer would commit first: it has nothing else to do.
  let secondDone = false;
  const second = runInTransaction(db, (trx) => store.append(trx, feedRow(site, 'test.second'))).finally(() => (secondDone = true));
  // It waits on the site's counter row, which the first holds until its commit.
  await waitFor('the second writer to wait for the counter', async () => (await waitingOn('inbox_positions')) === 1);

  // A reader in between: nothing past the start, not the second's row either.
  expect(secondDone).toBe(false);
  expect(await store.tail(site)).toBe(start);
  expect(await store.after(site, start, 10)).toEqual([]);

  release();
  expect(await first).toBe(start + 1);
  expect(await second).toBe(start + 2);
  const rows = await store.after(site, start, 10);
  expect(rows.map((r) => [r.position, r.kind])).toEqual([
    [start + 1, 'test.first'],
    [start + 2, 'test.second'],
  ]);
  expect(await store.tail(site)).toBe(start + 2);
});

test('a rolled-back writer gives its position back: the next one takes it', async () => {
  const site = (await h.newSite('feed rollback')).id;
  await runInTransaction(db, (trx) => store.append(trx, feedRow(site, 'test.setup')));
  const start = await store.tail(site);
  await expect(
    runInTransaction(db, async (trx) => {
      await store.append(trx, feedRow(site, 'test.lost'));
      throw new Error('rolled back');
    }),
  ).rejects.toThrow('rolled back');
  expect(await runInTransaction(db, (trx) => store.append(trx, feedRow(site, 'test.kept')))).toBe(start + 1);
  expect((await store.after(site, start, 10)).map((r) => r.kind)).toEqual(['test.kept']);
});

test('a reply with an Idempotency-Key completes its record once, in its own transaction, and its repeat replays it', async () => {
  const said = await h.visitorSay(h.site.id, 'v-feed-order', 'hello');
  const conversationId = said.conversation.id;
  const seen: string[] = [];
  const listener = (q: { sql: string }) => seen.push(q.sql);
  db.on('query', listener);
  let first;
  try {
    first = await request(h.app)
      .post(`/api/v1/conversations/${conversationId}/messages`)
      .set('authorization', `Bearer ${h.site.key}`)
      .set('idempotency-key', 'feed-order-1')
      .send({ content: 'a reply' });
  } finally {
    db.off('query', listener);
  }
  expect(first.status).toBe(201);
  // Every statement the reply sends after its key's look-up (the access layer's, not counted here).
  expect(seen.filter((sql) => !/[`"]api_keys[`"]/.test(sql)).map(statementKind)).toEqual([
    'insert idempotency_keys',
    'begin',
    'select conversations',
    'insert messages',
    'update conversations',
    'insert search_entries',
    'insert events',
    'update idempotency_keys',
    'update inbox_positions',
    'insert inbox_activity',
    'commit',
  ]);
  const recordUpdates = seen.filter((sql) => /^update\s+[`"]idempotency_keys[`"]/i.test(sql));
  expect(recordUpdates).toHaveLength(1);
  // One feed row for its event, one position taken.
  expect(seen.filter((sql) => /^insert\s+into\s+[`"]inbox_activity[`"]/i.test(sql))).toHaveLength(1);
  expect(seen.filter((sql) => /inbox_positions/i.test(sql))).toHaveLength(1);

  const repeat = await request(h.app)
    .post(`/api/v1/conversations/${conversationId}/messages`)
    .set('authorization', `Bearer ${h.site.key}`)
    .set('idempotency-key', 'feed-order-1')
    .send({ content: 'a reply' });
  expect(repeat.status).toBe(201);
  expect(repeat.headers['idempotent-replayed']).toBe('true');
  expect(repeat.body).toEqual(first.body);
});

test("a reply's delivery goes to the address its conversation's lock read, and only when the address subscribes", async () => {
  const reply = (siteKey: string, conversationId: string, content: string) =>
    request(h.app).post(`/api/v1/conversations/${conversationId}/messages`).set('authorization', `Bearer ${siteKey}`).send({ content });
  const deliveriesOf = async (messageId: string) =>
    db('deliveries').join('events', 'events.id', 'deliveries.event_id').where('events.message_id', messageId).select('deliveries.endpoint_id', 'events.name');

  const subscribed = await h.newSite('address subscribed');
  const endpoint = await webhooks(h).setEndpoint(subscribed.id, 'https://localhost:9/feed-order', 'message.created');
  const said = await h.visitorSay(subscribed.id, 'v-address', 'hello');
  const seen: string[] = [];
  const listener = (q: { sql: string }) => seen.push(q.sql);
  db.on('query', listener);
  let answer;
  try {
    answer = await reply(subscribed.key, said.conversation.id, 'to the address');
  } finally {
    db.off('query', listener);
  }
  expect(answer.status).toBe(201);
  expect(await deliveriesOf(answer.body.data.id)).toEqual([{ endpoint_id: endpoint.id, name: 'message.created' }]);
  expect(seen.filter((sql) => /[`"]webhook_endpoints[`"]/.test(sql))).toEqual([]);

  // The address changed to other events: the very next reply writes no delivery.
  await webhooks(h).setEndpoint(subscribed.id, 'https://localhost:9/feed-order', 'conversation.closed');
  const next = await reply(subscribed.key, said.conversation.id, 'not subscribed');
  expect(next.status).toBe(201);
  expect(await deliveriesOf(next.body.data.id)).toEqual([]);

  // A site without an address: the event, no delivery.
  const bare = await h.newSite('no address');
  const quiet = await h.visitorSay(bare.id, 'v-no-address', 'hello');
  const none = await reply(bare.key, quiet.conversation.id, 'nobody listens');
  expect(none.status).toBe(201);
  expect(await deliveriesOf(none.body.data.id)).toEqual([]);
  expect(await db('events').where('message_id', none.body.data.id).pluck('name')).toEqual(['message.created']);
});
