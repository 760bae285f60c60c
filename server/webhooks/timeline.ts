import type { AccessStore } from '../access/store';
import type { ConversationStore } from '../conversations/store';
import type { MessageRow, MessageStore } from '../messages/store';
import type { CursorCodec } from '../platform/cursor';
import { notFound } from '../platform/errors';
import { toIsoRequired } from '../platform/time';
import type { EventName } from './outbox';
import type { EventStore } from './store';
import type { IdempotencyStore } from '../idempotency/store';
import type { NoteDto } from '../notes/service';

/** Messages per page of a timeline at most; each page also holds their events and every attempt of those. */
export const TIMELINE_MAX_MESSAGES = 100;
/** Events and attempts one page reads at most (a conversation's page never costs more than this). */
const EVENTS_PER_PAGE = 3 * TIMELINE_MAX_MESSAGES + 10;
const ATTEMPTS_PER_PAGE = 2000;
/** Idempotent replays one page shows at most (the oldest of its time window). */
export const REPLAYS_PER_PAGE = 500;

type Author =
  | { type: 'visitor'; apiKeyId: null; apiKeyLabel: null; accountId: null }
  | { type: 'api_key'; apiKeyId: string | null; apiKeyLabel: string | null; accountId: null }
  | { type: 'member'; apiKeyId: null; apiKeyLabel: null; accountId: string | null };

/**
 * A conversation's timeline: its messages with who wrote each, the members' internal notes, the
 * idempotent replays of its replies, the events each emitted, and every delivery attempt of those events, in one list
 * ordered by time (a message before the events it emitted, an event before its attempts, a replay
 * after anything else at the same millisecond). Paged by messages (keyset, oldest first): a page
 * holds up to `limit` messages, the events, notes and replays from its first message to the next page's
 * first (the last page: to now), and every attempt of those events, so each query is an index
 * range with a bound.
 */
export function createTimeline(deps: {
  conversations: ConversationStore;
  messages: MessageStore;
  access: Pick<AccessStore, 'findKey'>;
  events: EventStore;
  replays: Pick<IdempotencyStore, 'replaysOfConversation'>;
  /** The conversation's internal notes written in a window of time (the notes service's `between`). */
  notes: (siteId: string, conversationId: string, from: number, to: number) => Promise<NoteDto[]>;
  cursors: CursorCodec;
}) {
  return async function timeline(siteId: string, conversationId: string, q: { limit?: number; cursor?: string }) {
    if (!(await deps.conversations.find(siteId, conversationId))) throw notFound('Conversation');
    const limit = Math.min(q.limit ?? 50, TIMELINE_MAX_MESSAGES);
    const scope = { timeline: conversationId, siteId };
    const after = q.cursor ? deps.cursors.decode(q.cursor, scope) : undefined;
    const rows = await deps.messages.page(siteId, conversationId, 'asc', after, limit + 1);
    const hasMore = rows.length > limit;
    const messages = hasMore ? rows.slice(0, limit) : rows;
    // The window of events: from this page's start to where the next page starts.
    const from = after ? (messages[0]?.created_at ?? Number.MAX_SAFE_INTEGER) : 0;
    const to = hasMore ? rows[limit].created_at - 1 : Number.MAX_SAFE_INTEGER;
    const events = from <= to ? await deps.events.eventsOfConversation(conversationId, from, to, EVENTS_PER_PAGE) : [];
    const replays = from <= to ? await deps.replays.replaysOfConversation(siteId, conversationId, from, to, REPLAYS_PER_PAGE) : [];
    const notes = from <= to ? await deps.notes(siteId, conversationId, from, to) : [];
    const attempts = await deps.events.attemptsOfEvents(
      events.map((e) => e.id),
      ATTEMPTS_PER_PAGE,
    );

    const labels = new Map<string, string | null>();
    const keyIds = [...messages.map((m) => m.api_key_id), ...replays.map((r) => r.api_key_id)];
    for (const id of new Set(keyIds.filter((x): x is string => x !== null))) {
      labels.set(id, (await deps.access.findKey(id))?.label ?? null);
    }
    const authorOf = (m: MessageRow): Author => {
      if (m.origin === 'api')
        return { type: 'api_key', apiKeyId: m.api_key_id, apiKeyLabel: m.api_key_id ? (labels.get(m.api_key_id) ?? null) : null, accountId: null };
      if (m.origin === 'messenger') return { type: 'member', apiKeyId: null, apiKeyLabel: null, accountId: m.author_id };
      return { type: 'visitor', apiKeyId: null, apiKeyLabel: null, accountId: null };
    };

    // A note written in the same millisecond as a message comes after it and before its events.
    const KIND = { message: 0, note: 0.5, event: 1, attempt: 2, replayed: 3 } as const;
    const entries = [
      ...messages.map((m) => ({
        sort: [m.created_at, KIND.message, m.id] as const,
        entry: {
          type: 'message' as const,
          at: toIsoRequired(m.created_at),
          messageId: m.id,
          direction: m.direction,
          origin: m.origin,
          format: m.format,
          author: authorOf(m),
        },
      })),
      ...events.map((e) => ({
        sort: [e.created_at, KIND.event, e.id] as const,
        entry: {
          type: 'event' as const,
          at: toIsoRequired(e.created_at),
          eventId: e.id,
          event: e.name as EventName,
          messageId: e.message_id ?? null,
          delivery: e.delivery_status,
        },
      })),
      ...attempts.map((a) => ({
        sort: [a.started_at, KIND.attempt, `${a.event_id}#${String(a.attempt).padStart(6, '0')}`] as const,
        entry: {
          type: 'attempt' as const,
          at: toIsoRequired(a.started_at),
          eventId: a.event_id,
          attempt: a.attempt,
          outcome: a.status_code !== null && a.status_code >= 200 && a.status_code < 300 ? ('delivered' as const) : ('failed' as const),
          status: a.status_code,
          error: a.error,
          durationMs: a.duration_ms,
        },
      })),
      ...notes.map((n) => ({
        sort: [Date.parse(n.createdAt), KIND.note, n.id] as const,
        entry: {
          type: 'note' as const,
          at: n.createdAt,
          noteId: n.id,
          authorId: n.authorId,
          authorName: n.authorName,
          content: n.content,
          format: n.format,
          editedAt: n.editedAt,
        },
      })),
      ...replays.map((r) => ({
        sort: [r.replayed_at, KIND.replayed, r.id] as const,
        entry: {
          type: 'replayed' as const,
          at: toIsoRequired(r.replayed_at),
          messageId: r.message_id,
          status: r.status,
          by: (r.api_key_id
            ? { type: 'api_key', apiKeyId: r.api_key_id, apiKeyLabel: labels.get(r.api_key_id) ?? null, accountId: null }
            : { type: 'member', apiKeyId: null, apiKeyLabel: null, accountId: r.account_id }) as Author,
          idempotencyKeyFingerprint: r.key_fingerprint,
        },
      })),
    ];
    entries.sort((x, y) => x.sort[0] - y.sort[0] || x.sort[1] - y.sort[1] || (x.sort[2] < y.sort[2] ? -1 : x.sort[2] > y.sort[2] ? 1 : 0));
    const last = messages[messages.length - 1];
    return {
      data: entries.map((e) => e.entry),
      page: { nextCursor: hasMore && last ? deps.cursors.encode({ createdAt: last.created_at, id: last.id }, scope) : null, hasMore },
    };
  };
}

export type Timeline = ReturnType<typeof createTimeline>;
