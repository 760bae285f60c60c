/** What the window shows: the status line, message bubbles with their files, the closed notice. */
import { renderContent, safeHref } from '../markdown';
import type { FeedEvent } from '../live-connection';
import { toParent } from './host';
import { setConversation, type Panel } from './state';
import type { Conversation, Message } from './types';
import { timeText } from './time';

export function setStatus(p: Panel, text: string) {
  if (p.dom.status.textContent !== text) p.dom.status.textContent = text;
}

export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function timeOf(iso: string): HTMLTimeElement {
  const t = document.createElement('time');
  t.dateTime = iso;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return t;
  t.textContent = timeText(d);
  t.title = d.toLocaleString([], { dateStyle: 'full', timeStyle: 'short' });
  return t;
}

/**
 * A message's bubble. A reply names who it is from (`authorName`, as the site shows it) above
 * its text, once for a run of replies by the same name; the visitor's own say "You" to screen readers.
 */
export function bubble(direction: 'incoming' | 'outgoing', authorName?: string | null, named = true): { el: HTMLElement; body: HTMLElement } {
  const el = document.createElement('div');
  el.className = `msg ${direction === 'incoming' ? 'mine' : 'theirs'}`;
  const who = document.createElement('span');
  if (direction === 'outgoing' && authorName) {
    el.dataset.author = authorName;
    who.className = named ? 'author' : 'sr-only';
    who.textContent = authorName;
    const colon = document.createElement('span');
    colon.className = 'sr-only';
    colon.textContent = ': ';
    who.append(colon);
  } else {
    who.className = 'sr-only';
    who.textContent = direction === 'incoming' ? 'You: ' : 'Reply: ';
  }
  const body = document.createElement('div');
  body.className = 'body';
  el.append(who, body);
  return { el, body };
}

export function appendToLog(p: Panel, el: HTMLElement) {
  const { log } = p.dom;
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.appendChild(el);
  if (atBottom || el.classList.contains('mine')) log.scrollTop = log.scrollHeight;
}

export function showMessage(p: Panel, m: Message, live: boolean) {
  const s = p.state;
  if (s.shown.has(m.id)) return;
  if (s.closedNotice && s.conversation && m.conversationId !== s.conversation.id) s.closedNotice = null;
  // The name shows once for a run of replies from the same person (as a chat app groups them).
  const before = p.dom.log.lastElementChild as HTMLElement | null;
  const { el, body } = bubble(m.direction, m.authorName, before?.dataset.author !== m.authorName);
  el.dataset.id = m.id;
  if (m.content) body.appendChild(renderContent(document, m.content, m.format));
  if (m.attachments.length) {
    const list = document.createElement('ul');
    list.className = 'files';
    for (const a of m.attachments) {
      const li = document.createElement('li');
      const href = safeHref(a.url);
      const label = `${a.name} (${formatSize(a.size)})`;
      if (href) {
        const link = document.createElement('a');
        link.href = href;
        link.target = '_blank';
        link.rel = 'noopener noreferrer nofollow';
        link.textContent = label;
        li.appendChild(link);
      } else li.textContent = label;
      list.appendChild(li);
    }
    body.appendChild(list);
  }
  el.appendChild(timeOf(m.createdAt));
  s.shown.set(m.id, el);
  appendToLog(p, el);
  if (m.direction === 'outgoing') p.signals.replyShown?.(m);
  if (live)
    toParent(p, {
      type: 'message',
      message: { id: m.id, conversationId: m.conversationId, direction: m.direction, content: m.content, format: m.format, createdAt: m.createdAt },
    });
}

export function showClosed(p: Panel, c: Conversation, live: boolean) {
  if (p.state.closedNotice?.dataset.conversation === c.id) return;
  const el = document.createElement('p');
  el.className = 'notice';
  el.dataset.conversation = c.id;
  el.textContent = 'This conversation was closed. Your next message starts a new one.';
  p.state.closedNotice = el;
  appendToLog(p, el);
  if (live) toParent(p, { type: 'conversation-closed', conversation: { id: c.id, state: c.state } });
}

/** An event of the visitor's feed, heard live. */
export function onEvent(p: Panel, e: FeedEvent) {
  const s = p.state;
  // Checked, not trusted: an event without its body is skipped.
  if (e.event === 'typing') {
    if (e.data && typeof e.data.conversationId === 'string') p.signals.typing?.(e.data.conversationId, e.data.typing === true);
    return;
  }
  if (e.event === 'message') {
    if (e.data.message) showMessage(p, e.data.message, true);
    return;
  }
  if (e.event !== 'conversation.started' && e.event !== 'conversation.closed') return;
  const c = e.data.conversation;
  if (!c) return;
  if (e.event === 'conversation.started') setConversation(p, c);
  else {
    if (s.conversation?.id === c.id) setConversation(p, c);
    showClosed(p, c, true);
  }
}
