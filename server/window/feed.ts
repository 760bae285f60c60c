/*
 * The visitor's feed: what the chat window shows live, as a sequence of events with ids, across
 * the visitor's conversations in the order they started:
 *
 *   conversation.started (id `<conv>.0.`)  ->  message (id `<conv>.<createdAt>.<ids>`) ...
 *   ->  conversation.closed (id `<conv>.closed`)  ->  the next conversation's conversation.started ...
 *
 * An event id is a position in that sequence, so `Last-Event-ID` (or `lastEventId` when polling)
 * resumes exactly after it. Inside a conversation messages are written under a lock on the
 * conversation with a time never below the previous one's, so "created at or after the last time
 * seen" finds every message committed since; the ids already delivered at that very millisecond
 * travel in the event id, because two messages of one millisecond may sort either way by id.
 * A conversation's state is read before its messages: once it reads closed, every message it will
 * ever have is already committed, and the closed event can follow them.
 */
import { ApiError } from '../platform/errors';
import type { ConversationRow, ConversationStore } from '../conversations/store';
import { conversationToDto } from '../conversations/store';
import type { MessageService } from '../messages/service';
import { mayHaveAttachments, type Message, type MessageStore } from '../messages/store';
import type { MediaStore } from '../media/store';
import type { components } from './generated/api';
import type { ReplyAuthors } from './authors';

export type FeedPosition =
  { kind: 'start' } | { kind: 'at'; conversationId: string; createdAt: number; ids: string[] } | { kind: 'closed'; conversationId: string };

export type WindowMessage = components['schemas']['WindowMessage'];
export type FeedEvent = components['schemas']['FeedEvent'];

const ID = '[0-9a-hjkmnp-tv-z]{26}';
const POSITION = new RegExp(`^(conv_${ID})\\.(?:(closed)|(\\d{1,15})\\.((?:msg_${ID})(?:,msg_${ID}){0,99})?)$`);
export const MAX_EVENT_ID_LENGTH = 3200;

export function encodePosition(p: FeedPosition): string {
  if (p.kind === 'start') return 'start';
  if (p.kind === 'closed') return `${p.conversationId}.closed`;
  return `${p.conversationId}.${p.createdAt}.${p.ids.join(',')}`;
}

export function decodePosition(text: string, where: string): FeedPosition {
  const bad = () =>
    new ApiError('invalid_request', `${where} is not an event id of this feed; reconnect without it.`, [{ path: where, message: 'unknown event id' }]);
  if (text === 'start') return { kind: 'start' };
  if (text.length > MAX_EVENT_ID_LENGTH) throw bad();
  const m = POSITION.exec(text);
  if (!m) throw bad();
  if (m[2]) return { kind: 'closed', conversationId: m[1] };
  return { kind: 'at', conversationId: m[1], createdAt: Number(m[3]), ids: m[4] ? m[4].split(',') : [] };
}

/**
 * What the window sees of a message: no API key ids, account ids or origins of the service's side;
 * a reply's author only by the name the site shows (authors.ts), null on the visitor's own.
 */
export function toWindowMessage(m: Message, authorName: string | null): WindowMessage {
  const { origin: _origin, apiKeyId: _apiKeyId, authorId: _authorId, ...rest } = m;
  return { ...rest, authorName };
}

export function createFeed(deps: {
  conversations: ConversationStore;
  messageStore: MessageStore;
  messages: MessageService;
  mediaStore: MediaStore;
  authors: Pick<ReplyAuthors, 'ofMessages'>;
}) {
  const { conversations, messageStore } = deps;

  async function ownConversation(siteId: string, visitorId: string, id: string, where: string): Promise<ConversationRow> {
    const c = await conversations.findOfVisitor(siteId, visitorId, id);
    if (!c)
      throw new ApiError('invalid_request', `${where} names no conversation of this visitor; reconnect without it.`, [
        { path: where, message: 'unknown event id' },
      ]);
    return c;
  }

  async function tail(siteId: string, visitorId: string): Promise<FeedPosition> {
    const latest = await conversations.latestOfVisitor(siteId, visitorId);
    if (!latest) return { kind: 'start' };
    if (latest.state === 'closed') return { kind: 'closed', conversationId: latest.id };
    const t = await messageStore.tailOf(latest.id);
    return t ? { kind: 'at', conversationId: latest.id, createdAt: t.createdAt, ids: t.ids } : { kind: 'at', conversationId: latest.id, createdAt: 0, ids: [] };
  }

  return {
    /** A position the client sent: only over the visitor's own conversations. */
    async checkPosition(siteId: string, visitorId: string, text: string, where: string): Promise<FeedPosition> {
      const p = decodePosition(text, where);
      if (p.kind !== 'start') await ownConversation(siteId, visitorId, p.conversationId, where);
      return p;
    },

    /** The end of the feed right now: a stream or poll started here gets only what happens next. */
    tail,

    /**
     * The visitor's newest conversation and the feed's end, read in that order after it: a
     * conversation that starts in between is then in the feed after the end as well, never missed.
     */
    async current(siteId: string, visitorId: string): Promise<{ conversation: ConversationRow | undefined; position: FeedPosition }> {
      const position = await tail(siteId, visitorId);
      return { conversation: await conversations.latestOfVisitor(siteId, visitorId), position };
    },

    /** The visitor's conversation with this id; another visitor's is not found, exactly like a missing one. */
    conversationOf: (siteId: string, visitorId: string, id: string) => conversations.findOfVisitor(siteId, visitorId, id),

    /** Up to `max` events after `from` (more may follow: call again from `position`). */
    async read(siteId: string, visitorId: string, from: FeedPosition, max = 100): Promise<{ events: FeedEvent[]; position: FeedPosition; more: boolean }> {
      const events: FeedEvent[] = [];
      let pos = from;
      // Each turn either emits or stops; a visitor's conversations are few, the bound is a guard.
      for (let turn = 0; turn < 50 && events.length < max; turn++) {
        if (pos.kind !== 'at') {
          const after = pos.kind === 'closed' ? await ownConversation(siteId, visitorId, pos.conversationId, 'Last-Event-ID') : null;
          const next = await conversations.nextOfVisitor(siteId, visitorId, after);
          if (!next) break;
          pos = { kind: 'at', conversationId: next.id, createdAt: 0, ids: [] };
          events.push({ id: encodePosition(pos), event: 'conversation.started', data: { conversation: conversationToDto(next) } });
          continue;
        }
        const conversation = await ownConversation(siteId, visitorId, pos.conversationId, 'Last-Event-ID');
        const budget = max - events.length;
        const at = pos;
        const rows = await messageStore.fromTime(conversation.id, at.createdAt, budget + at.ids.length + 1);
        const fresh = rows.filter((r) => !(r.created_at === at.createdAt && at.ids.includes(r.id)));
        const taken = fresh.slice(0, budget);
        // Only messages that may carry files cost a lookup (attachment_count is written with the message).
        const attachments = await deps.mediaStore.forMessages(taken.filter(mayHaveAttachments).map((r) => r.id));
        const messages = taken.map((r) =>
          deps.messages.toDto(
            r,
            attachments.filter((a) => a.message_id === r.id),
          ),
        );
        const authorNames = await deps.authors.ofMessages(siteId, messages);
        let createdAt = at.createdAt;
        let ids = at.ids;
        taken.forEach((r, i) => {
          if (r.created_at === createdAt) ids = [...ids, r.id];
          else {
            createdAt = r.created_at;
            ids = [r.id];
          }
          pos = { kind: 'at', conversationId: conversation.id, createdAt, ids };
          events.push({ id: encodePosition(pos), event: 'message', data: { message: toWindowMessage(messages[i], authorNames[i]) } });
        });
        if (fresh.length > budget) return { events, position: pos, more: true };
        if (conversation.state !== 'closed') break;
        pos = { kind: 'closed', conversationId: conversation.id };
        events.push({ id: encodePosition(pos), event: 'conversation.closed', data: { conversation: conversationToDto(conversation) } });
      }
      return { events, position: pos, more: events.length >= max };
    },
  };
}

export type Feed = ReturnType<typeof createFeed>;
