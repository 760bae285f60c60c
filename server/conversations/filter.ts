import { invalid } from '../platform/errors';
import { searchWords } from '../search/words';
import type { components } from '../../sdk/src/generated/api';

type ConversationState = components['schemas']['ConversationState'];

/**
 * The one filter of a conversation list, built once from the query (`conversationFilter`) and
 * used by the public list (`/api/v1/conversations`) and the inbox's (`/manage/v1/sites/{siteId}/inbox/conversations`);
 * the store turns it into one query (server/conversations/store.ts), walking the index `listIndexFor` names.
 * Times are milliseconds; `After` inclusive, `Before` exclusive.
 */
export interface ConversationFilter {
  state?: ConversationState;
  createdAfter?: number;
  createdBefore?: number;
  updatedAfter?: number;
  updatedBefore?: number;
  /** The assignee's account id; null: unassigned; absent: anyone or nobody. */
  assigneeId?: string | null;
  /** Conversations with a message after this member's read mark (`inbox_reads`, the inbox store's). */
  unreadFor?: string;
  /** Conversations carrying this tag (`conversation_tags`, 019_tags.ts). */
  tagId?: string;
  /** Conversations with an entry of the search read model holding every word (server/search/words.ts). */
  words?: string[];
}

/** The query fields a list takes: the public list's, and the inbox's besides them (each document's generated parameters). */
export interface FilterQuery {
  state?: ConversationState;
  createdAfter?: string;
  createdBefore?: string;
  updatedAfter?: string;
  updatedBefore?: string;
  assignee?: 'me' | 'unassigned' | 'any';
  unread?: boolean;
  tag?: string;
  q?: string;
}

function timeFilter(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid(`${name} is not an ISO 8601 date-time.`, [{ path: `/query/${name}`, message: 'must be an ISO 8601 date-time' }]);
  return ms;
}

/**
 * The filter of a list request; `me` is the signed-in member (the inbox's `assignee=me` and
 * `unread`). A search with no word to match (`q=a`, `q=+-*`) is refused rather than answered
 * with nothing, so the person learns why. Fields left out stay absent: the cursor is bound to the
 * filter's JSON (server/conversations/service.ts).
 */
export function conversationFilter(query: FilterQuery, me?: string): ConversationFilter {
  const filter: ConversationFilter = {};
  if (query.state) filter.state = query.state;
  for (const name of ['createdAfter', 'createdBefore', 'updatedAfter', 'updatedBefore'] as const) {
    const ms = timeFilter(query[name], name);
    if (ms !== undefined) filter[name] = ms;
  }
  if (query.assignee === 'me' || query.unread) {
    if (me === undefined) throw new Error('conversationFilter: a member filter without a member');
  }
  if (query.assignee === 'me') filter.assigneeId = me;
  else if (query.assignee === 'unassigned') filter.assigneeId = null;
  if (query.unread) filter.unreadFor = me;
  if (query.tag !== undefined) filter.tagId = query.tag;
  if (query.q !== undefined) {
    const words = searchWords(query.q);
    if (!words.length) {
      throw invalid('q has no word to search for: a word is 3 or more letters or digits.', [
        { path: '/query/q', message: 'must hold a word of at least 3 letters or digits' },
      ]);
    }
    filter.words = words;
  }
  return filter;
}

export type ListIndex = 'conversations_site_assignee_created' | 'conversations_site_state_created_updated' | 'conversations_site_created_updated';

/**
 * The index a list walks newest first, as a keyset range (005_read_path.ts, 011_inbox.ts): the one
 * that starts with the filter's equality columns. A search walks it too while its plan walks
 * (server/search/plan.ts); when the plan takes the full-text index instead, the store forces none,
 * and the engine joins the matches to the conversations its own way (a rare word is a few rows to sort).
 */
export function listIndexFor(filter: ConversationFilter): ListIndex {
  if (filter.assigneeId !== undefined) return 'conversations_site_assignee_created';
  if (filter.state) return 'conversations_site_state_created_updated';
  return 'conversations_site_created_updated';
}
