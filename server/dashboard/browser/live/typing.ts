/**
 * Typing and "seen" in the open conversation (docs/dashboard.md, "Typing and seen"): the member's
 * typing reported from the composer (only whether, never what), who else is typing (the visitor,
 * another member) and the newest reply the visitor was shown, kept current by the inbox stream.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { client } from '../api';
import { sessionInDoubt } from '../session';
import { createTypingIndicator, createTypingReporter } from '../../../browser-shared/typing';
import { subscribeInbox } from './inbox-stream';
import type { components } from '../../../manage/generated/api';

type SeenMark = components['schemas']['SeenMark'];

/** The composer's report of the member typing in `conversationId`; stopped when the conversation changes or the composer goes. */
export function useTypingReport(siteId: string, conversationId: string) {
  const reporter = useMemo(
    () =>
      createTypingReporter((typing) => {
        // Fire and forget: a lost report is only a typing line that shows late or expires by itself.
        if (sessionInDoubt()) return;
        void client
          .POST('/sites/{siteId}/inbox/conversations/{conversationId}/typing', { params: { path: { siteId, conversationId } }, body: { typing } })
          .catch(() => {});
      }),
    [siteId, conversationId],
  );
  useEffect(() => () => reporter.stop(), [reporter]);
  return reporter;
}

export interface ConversationLive {
  /** Who is typing now: `visitor`, or members' account ids. */
  typing: string[];
  /** The newest reply the visitor was shown, or null. */
  seen: SeenMark | null;
}

/** Who is typing in the conversation and what the visitor has seen, from the API once and the stream after. */
export function useConversationLive(siteId: string, conversationId: string): ConversationLive {
  const [typing, setTyping] = useState<string[]>([]);
  const [seen, setSeen] = useState<SeenMark | null>(null);
  useEffect(() => {
    let stale = false;
    setTyping([]);
    setSeen(null);
    const later = (a: SeenMark | null, b: SeenMark) => (!a || b.seenAt >= a.seenAt ? b : a);
    void client
      .GET('/sites/{siteId}/inbox/conversations/{conversationId}/seen', { params: { path: { siteId, conversationId } } })
      .then(({ data }) => !stale && data?.data && setSeen((s) => later(s, data.data!)))
      .catch(() => {});
    const indicators = new Map<string, ReturnType<typeof createTypingIndicator>>();
    const indicatorOf = (who: string) => {
      let i = indicators.get(who);
      if (!i) {
        i = createTypingIndicator((on) => !stale && setTyping((list) => (on ? [...list.filter((x) => x !== who), who] : list.filter((x) => x !== who))));
        indicators.set(who, i);
      }
      return i;
    };
    const off = subscribeInbox(siteId, (e) => {
      if (e.name === 'conversation.seen' && e.data.conversationId === conversationId) setSeen((s) => later(s, e.data));
      else if (e.name === 'conversation.typing' && e.data.conversationId === conversationId) {
        indicatorOf(e.data.from === 'visitor' ? 'visitor' : (e.data.accountId ?? 'agent')).heard(e.data.typing === true);
      } else if (e.name === 'message.created' && e.data.message?.conversationId === conversationId) {
        // The message they were typing is here.
        const m = e.data.message;
        indicatorOf(m.direction === 'incoming' ? 'visitor' : (m.authorId ?? 'agent')).heard(false);
      }
    });
    return () => {
      stale = true;
      off();
      for (const i of indicators.values()) i.heard(false);
    };
  }, [siteId, conversationId]);
  return { typing, seen };
}
