import type { Knex } from 'knex';
import { invalid, notFound } from '../platform/errors';
import { toIso } from '../platform/time';
import { runInTransaction } from '../db/transaction';
import type { ConversationStore } from '../conversations/store';
import type { MessageStore } from '../messages/store';
import type { EventChannel, LiveSignal } from '../delivery/channel';
import type { InboxRecorder } from '../inbox/activity';
import type { SeenStore } from './seen-store';
import { createTypingThrottle, seenMovesForward } from './live-rules';

/** The stream events of typing: on the inbox's stream (openapi/manage.yaml) and the window's (openapi/window.yaml). */
export const INBOX_TYPING_EVENT = 'conversation.typing';
export const WINDOW_TYPING_EVENT = 'typing';
/** The inbox feed's row (and stream event) of a visitor's "seen". */
export const SEEN_EVENT = 'conversation.seen';

export interface SeenMark {
  conversationId: string;
  messageId: string;
  seenAt: string;
}

/**
 * Typing and "seen" between the chat window and the inbox (issue 25, item 4). Typing is a signal
 * on the event channel, never written: throttled per typist and conversation here, then told to
 * the other side's live streams on every instance. "Seen" is stored (conversation_seen), moves
 * only forward, and each move is a row of the site's inbox feed, so members' streams show it and
 * a reconnect resumes it like any other change.
 */
export function createLiveSignals(deps: {
  db: Knex;
  conversations: Pick<ConversationStore, 'find' | 'findOfVisitor' | 'findForUpdate'>;
  messages: Pick<MessageStore, 'findById'>;
  store: SeenStore;
  record: InboxRecorder;
  channel: Pick<EventChannel, 'publish'>;
  now: () => number;
}) {
  const throttle = createTypingThrottle(deps.now);

  function signal(s: Omit<LiveSignal, 'kind'>) {
    deps.channel.publish([{ kind: 'signal', ...s }]);
  }

  async function visitorsConversation(siteId: string, visitorId: string, conversationId: string) {
    const conversation = await deps.conversations.findOfVisitor(siteId, visitorId, conversationId);
    // Another visitor's conversation is answered exactly like a missing one.
    if (!conversation) throw notFound('Conversation');
    return conversation;
  }

  const toMark = (r: { conversation_id: string; message_id: string; seen_at: number }): SeenMark => ({
    conversationId: r.conversation_id,
    messageId: r.message_id,
    seenAt: toIso(r.seen_at)!,
  });

  return {
    /** The visitor types (or stopped) in their conversation: the site's members are told, unless throttled or the conversation is closed. */
    async visitorTyping(siteId: string, visitorId: string, conversationId: string, typing: boolean): Promise<void> {
      const conversation = await visitorsConversation(siteId, visitorId, conversationId);
      if (conversation.state !== 'open' || !throttle.pass(`v ${siteId} ${visitorId} ${conversationId}`, typing)) return;
      signal({
        siteId,
        visitorId,
        conversationId,
        to: 'members',
        event: INBOX_TYPING_EVENT,
        data: { conversationId, from: 'visitor', accountId: null, typing },
      });
    },

    /** A member types (or stopped) a reply: the visitor's window and the site's other members are told, unless throttled or closed. */
    async agentTyping(siteId: string, conversationId: string, accountId: string, typing: boolean): Promise<void> {
      const conversation = await deps.conversations.find(siteId, conversationId);
      if (!conversation) throw notFound('Conversation');
      if (conversation.state !== 'open' || !throttle.pass(`a ${siteId} ${accountId} ${conversationId}`, typing)) return;
      const { visitor_id: visitorId } = conversation;
      signal({ siteId, visitorId, conversationId, to: 'visitor', event: WINDOW_TYPING_EVENT, data: { conversationId, typing } });
      signal({ siteId, visitorId, conversationId, to: 'members', event: INBOX_TYPING_EVENT, data: { conversationId, from: 'agent', accountId, typing } });
    },

    /**
     * The window showed its visitor the agent's reply `messageId`: the mark moves there unless it
     * is already there or past it (answered with the mark as it stands either way).
     */
    async visitorSaw(siteId: string, visitorId: string, conversationId: string, messageId: string): Promise<SeenMark> {
      await visitorsConversation(siteId, visitorId, conversationId);
      const message = await deps.messages.findById(messageId);
      if (!message || message.site_id !== siteId || message.conversation_id !== conversationId || message.direction !== 'outgoing') {
        throw invalid('messageId is not a reply in this conversation.', [{ path: '/body/messageId', message: 'must be a reply in this conversation' }]);
      }
      return runInTransaction(deps.db, async (trx) => {
        // The conversation's lock orders concurrent marks of one conversation (and its row exists: no gap lock).
        const conversation = await deps.conversations.findForUpdate(trx, siteId, conversationId);
        if (!conversation) throw notFound('Conversation');
        const current = await deps.store.find(siteId, conversationId, trx);
        const next = { createdAt: message.created_at, id: message.id };
        if (current && !seenMovesForward({ createdAt: current.message_created_at, id: current.message_id }, next)) return toMark(current);
        const row = { conversation_id: conversationId, site_id: siteId, message_id: message.id, message_created_at: message.created_at, seen_at: deps.now() };
        await deps.store.put(trx, row, current !== undefined);
        const mark = toMark(row);
        await deps.record(trx, { siteId, visitorId, kind: SEEN_EVENT, conversationId, accountId: null, body: mark });
        return mark;
      });
    },

    /** The conversation's "seen" mark for members (null before the visitor was shown a reply). */
    async seenOf(siteId: string, conversationId: string): Promise<SeenMark | null> {
      if (!(await deps.conversations.find(siteId, conversationId))) throw notFound('Conversation');
      const row = await deps.store.find(siteId, conversationId);
      return row ? toMark(row) : null;
    },
  };
}

export type LiveSignals = ReturnType<typeof createLiveSignals>;
