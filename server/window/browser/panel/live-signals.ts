/**
 * Typing and "seen" on the visitor's side (docs/window.md, "Typing and seen"). Only whether the
 * visitor types leaves the browser, never the text before it is sent. A member typing shows as a
 * polite status line under the conversation. The newest reply on screen is reported seen while
 * the panel is open and its page visible, once per reply.
 */
import { createTypingIndicator, createTypingReporter } from '../../../browser-shared/typing';
import type { Panel } from './state';
import type { TokenClient } from './tokens';
import type { Message } from './types';

const post = (body: object): RequestInit => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

export function wireLiveSignals(p: Panel, tokens: Pick<TokenClient, 'api'>) {
  const { state: s, dom } = p;
  const line = document.createElement('p');
  line.id = 'cw-typing';
  line.className = 'status';
  line.setAttribute('aria-live', 'polite');
  dom.log.after(line);
  const indicator = createTypingIndicator((shown) => (line.textContent = shown ? 'Typing a reply…' : ''));

  /** A call whose failure changes nothing the visitor sees (the next one says the same). */
  const quietly = (path: string, body: object) => void tokens.api(path, post(body)).catch(() => {});

  const reporter = createTypingReporter((typing) => {
    const c = s.conversation;
    // Before the first message there is no conversation: nobody to tell.
    if (c && c.state === 'open' && s.token) quietly(`/conversations/${c.id}/typing`, { typing });
  });
  dom.input.addEventListener('input', () => (dom.input.value.trim() ? reporter.input() : reporter.stop()));
  dom.form.addEventListener('submit', () => reporter.stop());

  let open = false;
  let newest: Message | null = null;
  let reported: string | null = null;
  const reportSeen = () => {
    const m = newest;
    if (!m || !open || document.visibilityState !== 'visible' || reported === m.id || !s.token) return;
    reported = m.id;
    quietly(`/conversations/${m.conversationId}/seen`, { messageId: m.id });
  };

  p.signals.typing = (conversationId, typing) => {
    if (conversationId === s.conversation?.id) indicator.heard(typing);
  };
  p.signals.replyShown = (m) => {
    indicator.heard(false); // the reply they were typing is here
    if (!newest || m.createdAt > newest.createdAt || (m.createdAt === newest.createdAt && m.id > newest.id)) newest = m;
    reportSeen();
  };
  document.addEventListener('visibilitychange', reportSeen);
  // Another conversation (or another visitor's session): what was typed or seen belongs to the last one.
  p.conversationWatchers.add((c) => {
    reporter.stop();
    indicator.heard(false);
    if (newest && newest.conversationId !== c?.id) newest = reported = null;
  });
  return {
    /** The loader opened or closed the panel. */
    opened(on: boolean) {
      open = on;
      reportSeen();
    },
  };
}
