/**
 * Shared replies in the browser: the `/` picker's filter, the replies suggested to a site that has
 * none, and the replies one browser kept before they were shared (localStorage, per account),
 * offered to an owner for import once. The replies themselves live on the server
 * (openapi/manage.yaml, tag Replies; docs/dashboard.md, "Shared replies").
 */

/** A reply as the browser kept it before replies were shared (and as the suggestions are written). */
export interface CannedReply {
  title: string;
  body: string;
}

/** Offered to an owner whose site has no shared replies yet ("Add the suggested replies"). */
export const DEFAULT_CANNED: CannedReply[] = [
  { title: 'Greeting', body: 'Hello {visitor.firstName|there}! Thanks for reaching out. How can I help you today?' },
  { title: 'One moment', body: 'Thanks, give me a moment while I look into this for you.' },
  { title: 'Order number', body: 'Could you send me your **order number**? You will find it in the confirmation email.' },
  { title: 'Anything else', body: 'Is there anything else I can help you with?' },
  { title: 'Goodbye', body: 'Thanks for chatting with {site.name}. Have a great day!' },
];

const key = (accountId: string) => `dashboard.canned.${accountId}`;
const answeredKey = (accountId: string) => `dashboard.canned.${accountId}.import-answered`;

/** The replies this browser kept for the account before they were shared; null when none (or storage is refused). */
export function localReplies(accountId: string): CannedReply[] | null {
  try {
    const raw = localStorage.getItem(key(accountId));
    if (raw === null) return null;
    const parsed: unknown = JSON.parse(raw);
    if (!Array.isArray(parsed)) return null;
    const replies = parsed.filter((r): r is CannedReply => typeof r?.title === 'string' && typeof r?.body === 'string');
    return replies.length ? replies : null;
  } catch {
    return null;
  }
}

/** Whether the owner answered the import offer in this browser (imported or declined): it is made once. */
export function importAnswered(accountId: string): boolean {
  try {
    return localStorage.getItem(answeredKey(accountId)) !== null;
  } catch {
    return true; // no storage: nothing was kept to import either
  }
}

/** Records the answer; the browser's own copy is left as it was. */
export function answerImport(accountId: string, answer: 'imported' | 'declined'): void {
  try {
    localStorage.setItem(answeredKey(accountId), answer);
  } catch {
    // storage refused: the offer shows again next time, harmless
  }
}

/** The replies whose title or text contains `query`, case-insensitive; titles that start with it first. */
export function filterReplies<R extends { title: string; text: string }>(replies: R[], query: string): R[] {
  const q = query.trim().toLowerCase();
  if (!q) return replies;
  const hits = replies.filter((r) => r.title.toLowerCase().includes(q) || r.text.toLowerCase().includes(q));
  return [...hits.filter((r) => r.title.toLowerCase().startsWith(q)), ...hits.filter((r) => !r.title.toLowerCase().startsWith(q))];
}
