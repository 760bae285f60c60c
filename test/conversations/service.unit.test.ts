import { createConversationService } from '../../server/conversations/service';
import type { ConversationRow } from '../../server/conversations/store';
import { createCursorCodec } from '../../server/platform/cursor';
import { fakeConversationStore } from '../fakes/fake-conversation-store';
import { noDatabase, noOutbox } from '../fakes/fake-db';
import type { Outbox } from '../../server/webhooks/outbox';

/** The conversation list's rules (filters, pages, cursors bound to their filters) against the in-memory store. No database. */
const T = Date.UTC(2026, 0, 1);
const SITE = 'ws_site';

function conversation(i: number, over: Partial<ConversationRow> = {}): ConversationRow {
  const at = T + Math.floor(i / 2) * 1000; // two conversations per millisecond value: ties broken by id
  return {
    id: `conv_${String(i).padStart(4, '0')}`,
    site_id: SITE,
    visitor_id: `v${i}`,
    state: 'open',
    open_marker: 1,
    created_at: at,
    updated_at: at,
    last_message_at: null,
    closed_at: null,
    ...over,
  };
}

function setup(rows: ConversationRow[]) {
  const store = fakeConversationStore(rows);
  const service = createConversationService({
    db: noDatabase,
    outbox: noOutbox as unknown as Outbox,
    store,
    cursors: createCursorCodec(Buffer.alloc(32, 1)),
    now: () => T,
  });
  return { store, service };
}
const code = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (err: { code?: string }) => err.code ?? 'no code',
  );

test('pages walk every conversation once, newest first, ties by id', async () => {
  const rows = Array.from({ length: 25 }, (_, i) => conversation(i));
  const { service } = setup([...rows, conversation(99, { site_id: 'ws_other' })]);
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await service.list(SITE, { limit: 7, cursor });
    seen.push(...page.data.map((c) => c.id));
    expect(page.page.hasMore).toBe(page.page.nextCursor !== null);
    cursor = page.page.nextCursor ?? undefined;
    pages++;
  } while (cursor);
  expect(pages).toBe(4);
  expect(seen).toEqual(rows.map((r) => r.id).reverse());
});

test('the default page is 25; a full last page says there is no more', async () => {
  const { service } = setup(Array.from({ length: 25 }, (_, i) => conversation(i)));
  const page = await service.list(SITE, {});
  expect(page.data).toHaveLength(25);
  expect(page.page).toEqual({ nextCursor: null, hasMore: false });
});

test('filters: state and time ranges (after inclusive, before exclusive)', async () => {
  const rows = Array.from({ length: 10 }, (_, i) => conversation(i, i % 2 ? { state: 'closed', open_marker: null, closed_at: T } : {}));
  const { service } = setup(rows);
  const ids = async (query: Parameters<typeof service.list>[1]) => (await service.list(SITE, query)).data.map((c) => c.id);
  expect(await ids({ state: 'closed' })).toEqual(['conv_0009', 'conv_0007', 'conv_0005', 'conv_0003', 'conv_0001']);
  expect(await ids({ createdAfter: new Date(T + 3000).toISOString(), createdBefore: new Date(T + 4000).toISOString() })).toEqual(['conv_0007', 'conv_0006']);
  expect(await code(service.list(SITE, { updatedAfter: 'yesterday' }))).toBe('invalid_request');
});

test('a cursor is bound to its site and filters, and refused when altered', async () => {
  const { service } = setup(Array.from({ length: 6 }, (_, i) => conversation(i)));
  const { page } = await service.list(SITE, { limit: 2, state: 'open' });
  const cursor = page.nextCursor!;
  expect((await service.list(SITE, { limit: 3, state: 'open', cursor })).data).toHaveLength(3); // the limit may change
  expect(await code(service.list(SITE, { limit: 2, state: 'closed', cursor }))).toBe('invalid_request');
  expect(await code(service.list('ws_other', { limit: 2, state: 'open', cursor }))).toBe('invalid_request');
  expect(await code(service.list(SITE, { limit: 2, state: 'open', cursor: cursor.slice(0, -2) + 'xx' }))).toBe('invalid_request');
});

test("another site's conversation is not found, exactly like a missing one", async () => {
  const { service } = setup([conversation(1), conversation(2, { site_id: 'ws_other' })]);
  expect((await service.get(SITE, 'conv_0001')).id).toBe('conv_0001');
  expect(await code(service.get(SITE, 'conv_0002'))).toBe('not_found');
  expect(await code(service.get(SITE, 'conv_9999'))).toBe('not_found');
});
