/**
 * The inbox page's data rules without a browser (server/dashboard/browser/inbox/model.ts and
 * canned.ts): which rows a filter holds, what each live event does to a row, messages merged
 * once in order, and the canned replies' filter.
 */
import {
  applyToRow,
  DEFAULT_FILTERS,
  inboxUrl,
  listQuery,
  matches,
  mergeMessages,
  OPEN_SETTLE_MS,
  openDelay,
  tagOfEvent,
  tagsAfter,
  withRow,
  formatSize,
  searchFromUrl,
  visitorOf,
  type Conversation,
  type Message,
} from '../../server/dashboard/browser/inbox/model';
import { filterReplies } from '../../server/dashboard/browser/inbox/canned';
import type { InboxLiveEvent } from '../../server/dashboard/browser/live/inbox-stream';

const ME = 'usr_01jd8x3r5k0000000000000001';
const OTHER = 'usr_01jd8x3r5k0000000000000002';
const conv = (over: Partial<Conversation> = {}): Conversation => ({
  id: 'conv_01jd8x3r5k0000000000000001',
  state: 'open',
  visitorId: 'v-1',
  createdAt: '2026-11-26T06:00:00.000Z',
  updatedAt: '2026-11-26T06:00:00.000Z',
  lastMessageAt: '2026-11-26T06:00:00.000Z',
  closedAt: null,
  assigneeId: null,
  unreadCount: 1,
  lastReadAt: null,
  visitorName: 'Brave Otter',
  visitorNameSource: 'generated',
  lastMessage: null,
  waitingSince: null,
  lastAnswer: null,
  tags: [],
  ...over,
});
const msg = (id: string, createdAt: string, over: Partial<Message> = {}): Message => ({
  id,
  conversationId: conv().id,
  direction: 'incoming',
  origin: 'widget',
  apiKeyId: null,
  authorId: null,
  content: id,
  format: 'plain',
  attachments: [],
  createdAt,
  ...over,
});
const event = (name: InboxLiveEvent['name'], data: unknown) => ({ id: '1', name, data, replayed: false }) as InboxLiveEvent;

describe('filters', () => {
  test('state, assignee and unread each narrow the list', () => {
    const f = { state: 'open', assignee: 'any', unread: false } as const;
    expect(matches(conv(), f, ME)).toBe(true);
    expect(matches(conv({ state: 'closed' }), f, ME)).toBe(false);
    expect(matches(conv({ assigneeId: ME }), { ...f, assignee: 'me' }, ME)).toBe(true);
    expect(matches(conv({ assigneeId: OTHER }), { ...f, assignee: 'me' }, ME)).toBe(false);
    expect(matches(conv({ assigneeId: OTHER }), { ...f, assignee: 'unassigned' }, ME)).toBe(false);
    expect(matches(conv({ unreadCount: 0 }), { ...f, unread: true }, ME)).toBe(false);
  });
});

describe('live events on a row', () => {
  const ctx = { me: ME, openId: null };
  const created = (m: Message) =>
    event('message.created', {
      conversation: { id: m.conversationId, state: 'open', updatedAt: m.createdAt, lastMessageAt: m.createdAt, closedAt: null },
      message: m,
    });

  test("someone else's message adds one unread and moves the times; my own and the open conversation's do not", () => {
    const m = msg('msg_01jd8x3r5k0000000000000009', '2026-11-26T07:00:00.000Z');
    const after = applyToRow(conv(), created(m), ctx);
    expect(after).toMatchObject({ unreadCount: 2, lastMessageAt: m.createdAt, updatedAt: m.createdAt });
    expect(applyToRow(conv(), created({ ...m, direction: 'outgoing', origin: 'messenger', authorId: ME }), ctx).unreadCount).toBe(1);
    expect(applyToRow(conv(), created(m), { me: ME, openId: conv().id }).unreadCount).toBe(1);
    const row = conv();
    expect(applyToRow(row, created({ ...m, conversationId: 'conv_01jd8x3r5k0000000000000002' }), ctx)).toBe(row);
  });

  test('another conversation’s event leaves the row as it is (the same object)', () => {
    const row = conv();
    expect(applyToRow(row, event('conversation.assigned', { conversationId: 'conv_01jd8x3r5k0000000000000002', assigneeId: ME }), ctx)).toBe(row);
  });

  test('closed, assigned, and read (mine only)', () => {
    const closed = applyToRow(
      conv(),
      event('conversation.closed', { conversation: { id: conv().id, state: 'closed', updatedAt: 'T2', lastMessageAt: null, closedAt: 'T2' } }),
      ctx,
    );
    expect(closed).toMatchObject({ state: 'closed', closedAt: 'T2' });
    expect(applyToRow(conv(), event('conversation.assigned', { conversationId: conv().id, assigneeId: OTHER, assignedBy: ME }), ctx).assigneeId).toBe(OTHER);
    expect(
      applyToRow(conv({ assigneeId: ME }), event('conversation.assigned', { conversationId: conv().id, assigneeId: null, assignedBy: ME }), ctx).assigneeId,
    ).toBeNull();
    const read = { conversationId: conv().id, accountId: ME, lastReadAt: 'T3', lastReadMessageId: null };
    expect(applyToRow(conv({ unreadCount: 5 }), event('conversation.read', read), ctx)).toMatchObject({ unreadCount: 0, lastReadAt: 'T3' });
    const tags = [{ id: 'tag_01jd8x3r5k0000000000000001', name: 'Billing' }];
    expect(applyToRow(conv(), event('conversation.tagged', { conversationId: conv().id, tags, by: OTHER }), ctx).tags).toEqual(tags);
    expect(applyToRow(conv(), event('conversation.tagged', { conversationId: 'conv_other', tags, by: OTHER }), ctx).tags).toEqual([]);
    expect(applyToRow(conv({ unreadCount: 5 }), event('conversation.read', { ...read, accountId: OTHER }), ctx).unreadCount).toBe(5);
  });

  test("a tag renamed or deleted changes the rows carrying it; a created one is on none; the site's list follows all three", () => {
    const [a, b, c] = ['tag_01jd8x3r5k0000000000000001', 'tag_01jd8x3r5k0000000000000002', 'tag_01jd8x3r5k0000000000000003'];
    const at = '2026-11-26T06:00:00.000Z';
    const row = conv({
      tags: [
        { id: a, name: 'Angry' },
        { id: b, name: 'Billing' },
      ],
    });
    const renamed = (id: string, name: string) => event('tag.renamed', { tag: { id, name, createdAt: at }, by: ME });
    // Renamed: the new name, in the API's order (by name, case aside).
    expect(applyToRow(row, renamed(a, 'zzz'), ctx).tags).toEqual([
      { id: b, name: 'Billing' },
      { id: a, name: 'zzz' },
    ]);
    expect(applyToRow(row, event('tag.deleted', { tag: { id: b, name: 'Billing' }, by: null }), ctx).tags).toEqual([{ id: a, name: 'Angry' }]);
    // Not on the row, the same name, or created: the same row.
    for (const e of [renamed(c, 'Other'), renamed(a, 'Angry'), event('tag.created', { tag: { id: c, name: 'New', createdAt: at }, by: ME })])
      expect(applyToRow(row, e, ctx)).toBe(row);
    expect(applyToRow(row, event('tag.deleted', { tag: 'x' }), ctx)).toBe(row);
    // The site's list gains a created tag too.
    const site = [{ id: a, name: 'Angry', createdAt: at }];
    const created = tagsAfter(site, event('tag.created', { tag: { id: c, name: 'billing', createdAt: at }, by: ME }), true);
    expect(created.map((t) => t.name)).toEqual(['Angry', 'billing']);
    expect(tagsAfter(created, renamed(a, 'Zebra'), true).map((t) => t.name)).toEqual(['billing', 'Zebra']);
    expect(tagsAfter(created, event('tag.deleted', { tag: { id: c, name: 'billing' }, by: ME }), true)).toEqual(site);
    expect(tagOfEvent(event('conversation.tagged', { conversationId: conv().id, tags: [], by: ME }))).toBeNull();
  });

  test('malformed data changes nothing', () => {
    const row = conv();
    expect(applyToRow(row, event('message.created', null), ctx)).toBe(row);
    expect(applyToRow(row, event('conversation.closed', 'x'), ctx)).toBe(row);
  });
});

test('messages merge by id, oldest first, the id breaking ties', () => {
  const a = msg('msg_01jd8x3r5k000000000000000a', '2026-11-26T06:00:00.000Z');
  const b = msg('msg_01jd8x3r5k000000000000000b', '2026-11-26T06:00:00.000Z');
  const c = msg('msg_01jd8x3r5k000000000000000c', '2026-11-26T06:00:01.000Z');
  expect(mergeMessages([c, b], [a, c]).map((m) => m.id)).toEqual([a.id, b.id, c.id]);
});

test('the visitor, sizes and canned replies', () => {
  expect(visitorOf({ visitorId: 'user:42' })).toEqual({ label: '42', verified: true });
  expect(visitorOf({ visitorId: 'anon-1' })).toEqual({ label: 'anon-1', verified: false });
  expect([formatSize(12), formatSize(2048), formatSize(20 * 1024 * 1024 + 1)]).toEqual(['12 B', '2.0 KB', '20 MB']);
  const replies = [
    { title: 'Greeting', text: 'Hello there' },
    { title: 'Order number', text: 'Your order number, please' },
  ];
  expect(filterReplies(replies, '')).toBe(replies);
  expect(filterReplies(replies, 'ORDER').map((r) => r.title)).toEqual(['Order number']);
  expect(filterReplies(replies, 'there').map((r) => r.title)).toEqual(['Greeting']); // the text counts too
  // Titles that start with the query come before those that only contain it.
  expect(
    filterReplies(
      [
        { title: 'Say thanks', text: '' },
        { title: 'Thanks', text: '' },
      ],
      'thanks',
    ).map((r) => r.title),
  ).toEqual(['Thanks', 'Say thanks']);
});

describe('the search and the filters as the document types them', () => {
  test('a page asks with what differs from the defaults, the search and the tag when given', () => {
    expect(listQuery(DEFAULT_FILTERS, 25, null)).toEqual({ state: 'open', assignee: 'any', limit: 25 });
    expect(listQuery({ ...DEFAULT_FILTERS, unread: true, q: 'refund', tag: 'tag_x' }, 10, 'c1')).toEqual({
      state: 'open',
      assignee: 'any',
      unread: true,
      q: 'refund',
      tag: 'tag_x',
      limit: 10,
      cursor: 'c1',
    });
  });

  test('the search is kept in the address beside the open conversation', () => {
    expect(inboxUrl('/sites/ws_1/inbox', null, undefined)).toBe('/sites/ws_1/inbox');
    expect(inboxUrl('/sites/ws_1/inbox', 'conv_1', 'late parcel')).toBe('/sites/ws_1/inbox?q=late+parcel&conversation=conv_1');
    expect(searchFromUrl('?q=late+parcel&conversation=conv_1')).toBe('late parcel');
    expect(searchFromUrl('?q=%20%20')).toBeUndefined();
    expect(searchFromUrl('')).toBeUndefined();
  });

  test('a conversation arriving live joins a searched list only when the server is asked again; a tagged list when it carries the tag', () => {
    expect(matches(conv(), { ...DEFAULT_FILTERS, q: 'refund' }, ME)).toBe(false);
    expect(matches(conv(), { ...DEFAULT_FILTERS, tag: 'tag_x' }, ME)).toBe(false);
    expect(matches(conv({ tags: [{ id: 'tag_x', name: 'X' }] }), { ...DEFAULT_FILTERS, tag: 'tag_x' }, ME)).toBe(true);
    expect(matches(conv({ tags: [{ id: 'tag_x', name: 'X' }], state: 'closed' }), { ...DEFAULT_FILTERS, tag: 'tag_x' }, ME)).toBe(false);
    expect(matches(conv(), DEFAULT_FILTERS, ME)).toBe(true);
  });

  test("a row joins the loaded list in the list's order, or waits for the next page", () => {
    const at = (createdAt: string, id: string) => conv({ id, createdAt });
    const rows = [at('2026-11-26T09:00:00.000Z', 'conv_c'), at('2026-11-26T08:00:00.000Z', 'conv_b'), at('2026-11-26T07:00:00.000Z', 'conv_a')];
    const ids = (list: Conversation[]) => list.map((c) => c.id);
    expect(ids(withRow(rows, at('2026-11-26T10:00:00.000Z', 'conv_new'), true))).toEqual(['conv_new', 'conv_c', 'conv_b', 'conv_a']);
    expect(ids(withRow(rows, at('2026-11-26T08:00:00.000Z', 'conv_bb'), true))).toEqual(['conv_c', 'conv_bb', 'conv_b', 'conv_a']);
    // Older than every loaded row: the next page brings it, unless this is the last page.
    expect(withRow(rows, at('2026-11-26T06:00:00.000Z', 'conv_old'), true)).toBe(rows);
    expect(ids(withRow(rows, at('2026-11-26T06:00:00.000Z', 'conv_old'), false))).toEqual(['conv_c', 'conv_b', 'conv_a', 'conv_old']);
    expect(withRow(rows, rows[1], false)).toBe(rows);
  });
});

test('a single step opens its conversation at once; a step soon after another waits for the selection to rest', () => {
  expect(openDelay(null, 1_000)).toBe(0);
  expect(openDelay(1_000, 1_000 + OPEN_SETTLE_MS)).toBe(0);
  expect(openDelay(1_000, 1_000 + OPEN_SETTLE_MS + 400)).toBe(0);
  // Key repeat: every step of a burst waits the whole settling time, from its own step.
  expect(openDelay(1_000, 1_033)).toBe(OPEN_SETTLE_MS);
  expect(openDelay(1_000, 1_000 + OPEN_SETTLE_MS - 1)).toBe(OPEN_SETTLE_MS);
  expect(openDelay(1_000, 1_000)).toBe(OPEN_SETTLE_MS);
});
