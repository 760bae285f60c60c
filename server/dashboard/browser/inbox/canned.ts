/**
 * Canned replies: per member, in this browser's localStorage (not on the server, so not shared
 * between browsers or with the team). A member who never saved any gets the defaults below.
 */

export interface CannedReply {
  title: string;
  body: string;
}

export const DEFAULT_CANNED: CannedReply[] = [
  { title: 'Greeting', body: 'Hello! Thanks for reaching out. How can I help you today?' },
  { title: 'One moment', body: 'Thanks, give me a moment while I look into this for you.' },
  { title: 'Order number', body: 'Could you send me your **order number**? You will find it in the confirmation email.' },
  { title: 'Anything else', body: 'Is there anything else I can help you with?' },
  { title: 'Goodbye', body: 'Thanks for chatting with us. Have a great day!' },
];

const key = (accountId: string) => `dashboard.canned.${accountId}`;

export function loadCanned(accountId: string): CannedReply[] {
  try {
    const raw = localStorage.getItem(key(accountId));
    if (raw === null) return DEFAULT_CANNED;
    const parsed: unknown = JSON.parse(raw);
    if (!Array.isArray(parsed)) return DEFAULT_CANNED;
    return parsed.filter((r): r is CannedReply => typeof r?.title === 'string' && typeof r?.body === 'string');
  } catch {
    return DEFAULT_CANNED;
  }
}

export function saveCanned(accountId: string, replies: CannedReply[]): void {
  try {
    localStorage.setItem(key(accountId), JSON.stringify(replies));
  } catch {
    // storage refused: the list lasts until the page is closed
  }
}

/** The replies whose title or text contains `query`, case-insensitive; titles that start with it first. */
export function filterCanned(replies: CannedReply[], query: string): CannedReply[] {
  const q = query.trim().toLowerCase();
  if (!q) return replies;
  const hits = replies.filter((r) => r.title.toLowerCase().includes(q) || r.body.toLowerCase().includes(q));
  return [...hits.filter((r) => r.title.toLowerCase().startsWith(q)), ...hits.filter((r) => !r.title.toLowerCase().startsWith(q))];
}
