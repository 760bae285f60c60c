/**
 * Visitors told of late replies (docs/email.md, "Replies by email"): pure rules, the clock passed in.
 *
 * An agent's reply starts a notice due REPLY_EMAIL_DELAY_MS later, unless one is already pending for
 * the conversation (the replies of that period make one email). When it comes due, the replies the
 * window has not marked seen are emailed: a window open and visible marks a reply seen within
 * seconds, so a reply still unseen after the delay is one the visitor missed (the tab closed,
 * hidden or asleep), and a visitor who came back and read it gets no email.
 */

/** How long after an agent's reply its email waits, for the window to show it first. */
export const REPLY_EMAIL_DELAY_MS = 5 * 60_000;
/** Messages of the conversation the email quotes, newest last. */
export const REPLY_EMAIL_MESSAGES = 5;

/** When a notice started now comes due. */
export const noticeDueAt = (now: number, delayMs = REPLY_EMAIL_DELAY_MS) => now + delayMs;

export interface ReplyEmailSubscriber {
  email: string | null;
  replyEmailAt: number | null;
  replyEmailUnsubscribedAt: number | null;
}

/** Whether replies to this visitor may be emailed at all: it left an email for that, and did not unsubscribe. */
export function subscribed(v: ReplyEmailSubscriber | undefined): v is ReplyEmailSubscriber & { email: string } {
  return Boolean(v?.email && v.replyEmailAt !== null && v.replyEmailUnsubscribedAt === null);
}

/** What agents and the window are shown: whether replies are emailed to the visitor. */
export function replyEmailState(v: ReplyEmailSubscriber | undefined): 'none' | 'subscribed' | 'unsubscribed' {
  if (!v?.email || v.replyEmailAt === null) return 'none';
  return v.replyEmailUnsubscribedAt === null ? 'subscribed' : 'unsubscribed';
}

interface Mark {
  createdAt: number;
  id: string;
}

/** Agent replies after the window's seen mark (by createdAt, then id), of messages newest first. */
export function unseenReplies<M extends Mark & { direction: string }>(newestFirst: readonly M[], seen: Mark | undefined): M[] {
  return newestFirst.filter((m) => m.direction === 'outgoing' && (!seen || m.createdAt > seen.createdAt || (m.createdAt === seen.createdAt && m.id > seen.id)));
}

export type ReplyEmailDecision = { send: true } | { send: false; reason: string };

/** What a due notice does. */
export function decideReplyEmail(input: { visitor: ReplyEmailSubscriber | undefined; unseen: number }): ReplyEmailDecision {
  if (!subscribed(input.visitor)) return { send: false, reason: 'not sent: the visitor left no email or unsubscribed' };
  if (input.unseen === 0) return { send: false, reason: 'not sent: the visitor saw the replies in the window' };
  return { send: true };
}
