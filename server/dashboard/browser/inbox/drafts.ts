/**
 * Half-written replies, one per conversation: in memory for the tab's life (text, files and the
 * message's Idempotency-Key), the text also in sessionStorage so a reload of the tab keeps it.
 * The page is never unmounted by a session expiry (the app's sign-in dialog opens over it), and a
 * switch of conversation only changes which draft the composer shows.
 */

export interface Draft {
  text: string;
  files: File[];
  /** The Idempotency-Key of this composed message: a retry after a dropped answer sends the same. */
  key: string;
  /** A send was attempted with `key`; an edit after that makes it a different message (a new key). */
  attempted: boolean;
}

const drafts = new Map<string, Draft>();
const storageKey = (siteId: string, conversationId: string) => `dashboard.draft.${siteId}.${conversationId}`;

/** A random key (crypto.randomUUID needs a secure context; getRandomValues does not). */
export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `inbox-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function stored(siteId: string, conversationId: string): string {
  try {
    return sessionStorage.getItem(storageKey(siteId, conversationId)) ?? '';
  } catch {
    return ''; // storage refused (privacy settings): memory only
  }
}

export function getDraft(siteId: string, conversationId: string): Draft {
  const id = `${siteId}/${conversationId}`;
  let d = drafts.get(id);
  if (!d) {
    d = { text: stored(siteId, conversationId), files: [], key: newKey(), attempted: false };
    drafts.set(id, d);
  }
  return d;
}

/** Keeps the draft's new content; after a failed send, an edit starts a new message (a new key). */
export function updateDraft(siteId: string, conversationId: string, change: Partial<Pick<Draft, 'text' | 'files'>>): Draft {
  const before = getDraft(siteId, conversationId);
  const next: Draft = { ...before, ...change };
  if (before.attempted) {
    next.key = newKey();
    next.attempted = false;
  }
  drafts.set(`${siteId}/${conversationId}`, next);
  try {
    if (next.text) sessionStorage.setItem(storageKey(siteId, conversationId), next.text);
    else sessionStorage.removeItem(storageKey(siteId, conversationId));
  } catch {
    // storage full or refused: the memory copy still holds it
  }
  return next;
}

/** A send is under way with the draft's key. */
export function markAttempted(siteId: string, conversationId: string): void {
  const d = getDraft(siteId, conversationId);
  drafts.set(`${siteId}/${conversationId}`, { ...d, attempted: true });
}

/**
 * The message with `key` was sent: the next one starts empty with a key of its own. Unless the
 * draft was edited while it was being sent (an edit after the attempt gave it a new key, see
 * updateDraft): that is the next message already, and it stays as typed.
 */
export function clearSent(siteId: string, conversationId: string, key: string): Draft {
  const now = getDraft(siteId, conversationId);
  return now.key === key ? clearDraft(siteId, conversationId) : now;
}

/** Sent: the next message starts empty with a key of its own. */
export function clearDraft(siteId: string, conversationId: string): Draft {
  const d: Draft = { text: '', files: [], key: newKey(), attempted: false };
  drafts.set(`${siteId}/${conversationId}`, d);
  try {
    sessionStorage.removeItem(storageKey(siteId, conversationId));
  } catch {
    // nothing stored
  }
  return d;
}
