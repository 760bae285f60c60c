/**
 * The inbox's data rules, without the page: which conversations a filter shows, how a live event
 * changes a row of the list, and the small formatting the rows and messages share. Pure functions,
 * so the unit tier checks them (test/dashboard/inbox-model.unit.test.ts).
 */
import type { Schemas } from '../api';
import type { operations } from '../../../manage/generated/api';
import type { InboxLiveEvent } from '../live/inbox-stream';

export type Conversation = Schemas['InboxConversation'];
export type Message = Schemas['Message'];
export type Member = Schemas['Member'];
export type Tag = Schemas['Tag'];
type TagRef = Schemas['TagRef'];

/** The inbox list's query as the document defines it (generated from openapi/manage.yaml). */
export type InboxQuery = NonNullable<operations['listInboxConversations']['parameters']['query']>;

/** The list's filters: the document's own parameters, the pickers' always set, the search and the tag when given. */
export type Filters = Required<Pick<InboxQuery, 'state' | 'assignee' | 'unread'>> & Pick<InboxQuery, 'q' | 'tag'>;

export const DEFAULT_FILTERS: Filters = { state: 'open', assignee: 'any', unread: false };

/** The query a list page asks with: what differs from the document's defaults, and the page's position. */
export function listQuery(f: Filters, limit: number, cursor: string | null): InboxQuery {
  return {
    state: f.state,
    assignee: f.assignee,
    ...(f.unread ? { unread: true } : {}),
    ...(f.q ? { q: f.q } : {}),
    ...(f.tag ? { tag: f.tag } : {}),
    limit,
    ...(cursor ? { cursor } : {}),
  };
}

/** A search kept in the address (`?q=`), so a reload or a link repeats it. */
export const searchFromUrl = (search: string) => new URLSearchParams(search).get('q')?.trim() || undefined;

/** The inbox's address with the open conversation and the search. */
export function inboxUrl(base: string, conversationId: string | null, q: string | undefined): string {
  const params = new URLSearchParams();
  if (q) params.set('q', q);
  if (conversationId) params.set('conversation', conversationId);
  const query = params.toString();
  return query ? `${base}?${query}` : base;
}

/**
 * Whether the list under `f` would hold `c` (for a conversation that arrives live: started, or
 * given the filtered tag). A search is the server's to judge: a conversation arriving live joins a
 * searched list when it is asked again.
 */
export function matches(c: Conversation, f: Filters, me: string): boolean {
  if (f.q) return false;
  if (f.tag && !c.tags.some((t) => t.id === f.tag)) return false;
  if (c.state !== f.state) return false;
  if (f.assignee === 'me' && c.assigneeId !== me) return false;
  if (f.assignee === 'unassigned' && c.assigneeId !== null) return false;
  if (f.unread && c.unreadCount === 0) return false;
  return true;
}

/**
 * The loaded rows with `c` in its place in the list's order (newest first by `createdAt`, then
 * `id`); the same rows when it is there already, or when it sorts past the last loaded row while
 * more pages remain (the next page brings it).
 */
export function withRow(rows: Conversation[], c: Conversation, hasMore: boolean): Conversation[] {
  if (rows.some((r) => r.id === c.id)) return rows;
  const after = (r: Conversation) => r.createdAt > c.createdAt || (r.createdAt === c.createdAt && r.id > c.id);
  const at = rows.findIndex((r) => !after(r));
  if (at < 0) return hasMore ? rows : [...rows, c];
  return [...rows.slice(0, at), c, ...rows.slice(at)];
}

/** The public card the stream's conversation events carry. */
interface PublicCard {
  id: string;
  state: 'open' | 'closed';
  updatedAt: string;
  lastMessageAt: string | null;
  closedAt: string | null;
}

/** What a live event changes in the list, given who is signed in and which conversation is open. */
export interface LiveContext {
  me: string;
  /** The open conversation: its new messages are read as they arrive, so they add no unread. */
  openId: string | null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/** The message of a `message.created` event, if the event is one. */
export function messageOf(e: InboxLiveEvent): Message | null {
  if (e.name !== 'message.created' || !isObject(e.data) || !isObject(e.data.message)) return null;
  const m = e.data.message as unknown as Message;
  return typeof m.id === 'string' && typeof m.conversationId === 'string' ? m : null;
}

/** The conversation an event is about. */
export function conversationIdOf(e: InboxLiveEvent): string | null {
  // Checked as it came off the wire: the document's type of `data` is what a correct service sends.
  const data: unknown = e.data;
  if (!isObject(data)) return null;
  if (isObject(data.conversation) && typeof data.conversation.id === 'string') return data.conversation.id;
  return typeof data.conversationId === 'string' ? data.conversationId : null;
}

/** A message counts as unread for `me` when someone else wrote it (the API's rule). */
export const unreadFor = (m: Message, me: string) => m.authorId !== me;

/**
 * The row after a live event (the same object when nothing changed). `conversation.started` is not
 * here: the page reads the new conversation's inbox card (assignee, unread) from the API.
 */
export function applyToRow(c: Conversation, e: InboxLiveEvent, ctx: LiveContext): Conversation {
  const data: unknown = e.data;
  const card = isObject(data) && isObject(data.conversation) ? (data.conversation as unknown as PublicCard) : null;
  switch (e.name) {
    case 'message.created': {
      const m = messageOf(e);
      if (!m || m.conversationId !== c.id) return c;
      const unread = c.id !== ctx.openId && unreadFor(m, ctx.me) ? c.unreadCount + 1 : c.unreadCount;
      return {
        ...c,
        unreadCount: unread,
        lastMessageAt: card?.lastMessageAt ?? m.createdAt,
        updatedAt: card?.updatedAt ?? c.updatedAt,
        state: card?.state ?? c.state,
      };
    }
    case 'conversation.closed':
      if (!card || card.id !== c.id) return c;
      return { ...c, state: card.state, closedAt: card.closedAt, updatedAt: card.updatedAt };
    case 'conversation.assigned': {
      const d = e.data as { conversationId?: unknown; assigneeId?: unknown };
      if (d.conversationId !== c.id) return c;
      return { ...c, assigneeId: typeof d.assigneeId === 'string' ? d.assigneeId : null };
    }
    case 'conversation.tagged': {
      const d = e.data as { conversationId?: unknown; tags?: unknown };
      if (d.conversationId !== c.id || !Array.isArray(d.tags)) return c;
      return { ...c, tags: d.tags as Conversation['tags'] };
    }
    case 'tag.renamed':
    case 'tag.deleted': {
      const tags = tagsAfter(c.tags, e);
      return tags === c.tags ? c : { ...c, tags };
    }
    case 'conversation.read': {
      const d = e.data as { conversationId?: unknown; accountId?: unknown; lastReadAt?: unknown };
      if (d.conversationId !== c.id || d.accountId !== ctx.me) return c;
      return { ...c, unreadCount: 0, lastReadAt: typeof d.lastReadAt === 'string' ? d.lastReadAt : c.lastReadAt };
    }
    default:
      return c;
  }
}

/** Tags in the API's order: by name without regard to case, then id. */
const byName = (a: TagRef, b: TagRef) => {
  const x = a.name.toLowerCase();
  const y = b.name.toLowerCase();
  return x === y ? (a.id < b.id ? -1 : 1) : x < y ? -1 : 1;
};

/** The tag a `tag.*` event is about, as it came off the wire; null for any other event. */
export function tagOfEvent(e: InboxLiveEvent): TagRef | null {
  if (e.name !== 'tag.created' && e.name !== 'tag.renamed' && e.name !== 'tag.deleted') return null;
  const data: unknown = e.data;
  if (!isObject(data) || !isObject(data.tag)) return null;
  const { id, name } = data.tag;
  return typeof id === 'string' && typeof name === 'string' ? (data.tag as unknown as TagRef) : null;
}

/**
 * A list of tags after a change of the site's tags (the same array when nothing changed): the
 * site's own list (`site`: the picker's, the filter's) gains a created tag; a conversation's keeps
 * the tags it carries, renamed, less a deleted one.
 */
export function tagsAfter<T extends TagRef>(tags: T[], e: InboxLiveEvent, site = false): T[] {
  const tag = tagOfEvent(e);
  if (!tag) return tags;
  const at = tags.findIndex((t) => t.id === tag.id);
  if (e.name === 'tag.deleted') return at < 0 ? tags : tags.filter((t) => t.id !== tag.id);
  if (at < 0) return site ? [...tags, tag as T].sort(byName) : tags;
  if (tags[at].name === tag.name) return tags;
  return tags.map((t, i) => (i === at ? { ...t, name: tag.name } : t)).sort(byName);
}

/**
 * How long the selection must rest before a conversation opened in quick succession loads: j held
 * down (key repeat, 30 a second) passes over rows without opening each, which would cost some seven
 * calls apiece against the member's 300 a minute and mark every one read.
 */
export const OPEN_SETTLE_MS = 250;

/**
 * How long to wait before opening the conversation selected at `now` (ms; 0: at once), when the
 * selection before moved at `previousAt` (null: never). A single step opens at once; during a burst
 * each step waits, and the page cancels the wait at the next step, so only where it stops is opened.
 */
export function openDelay(previousAt: number | null, now: number): number {
  return previousAt !== null && now - previousAt < OPEN_SETTLE_MS ? OPEN_SETTLE_MS : 0;
}

/** Messages merged by id, oldest first: a page loaded, a reply sent and the same reply arriving live meet once. */
export function mergeMessages(a: Message[], b: Message[]): Message[] {
  const byId = new Map<string, Message>();
  for (const m of a) byId.set(m.id, m);
  for (const m of b) byId.set(m.id, m);
  // Ids are ULIDs (time-ordered); createdAt first, the id breaks ties like the API's order.
  return [...byId.values()].sort((x, y) => (x.createdAt === y.createdAt ? (x.id < y.id ? -1 : 1) : x.createdAt < y.createdAt ? -1 : 1));
}

/** The visitor as far as the API knows them: a verified user (`user:<id>`) or an anonymous id. */
export function visitorOf(c: Pick<Conversation, 'visitorId'>): { label: string; verified: boolean } {
  if (c.visitorId.startsWith('user:')) return { label: c.visitorId.slice(5), verified: true };
  return { label: c.visitorId, verified: false };
}

/** "1.2 MB": sizes of files for people. */
export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}
