import { useEffect, useRef } from 'preact/hooks';
import { Button } from '../components/Button';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { BASE } from '../router';
import { visitorOf, type Conversation, type Filters } from './model';
import { TagChips } from './TagPicker';
import { useSiteTags } from './site-tags';

export interface ConversationListProps {
  siteId: string;
  me: string;
  items: Conversation[] | null;
  selectedId: string | null;
  filters: Filters;
  onFilters: (f: Filters) => void;
  /** Said under the filters when they changed without the member (a filtered tag deleted). */
  notice?: string | null;
  hasMore: boolean;
  loading: boolean;
  error: unknown;
  onLoadMore: () => void;
  onSelect: (id: string) => void;
  /** Member emails by account id, for the assignee (empty until loaded). */
  emails: Map<string, string>;
}

/** The filters, the conversations loaded so far, and the next page as the list scrolls to its end. */
export function ConversationList(p: ConversationListProps) {
  const end = useRef<HTMLDivElement>(null);
  const more = useRef(p.onLoadMore);
  more.current = p.onLoadMore;
  const canLoad = p.hasMore && !p.loading && !p.error;
  // The site's tags for the tag filter, kept live; a site with none shows no tag filter. A failed read leaves it out too.
  const tags = useSiteTags(p.siteId).tags ?? [];

  // The next page loads when the end of the list scrolls into view (the button does it without scrolling).
  useEffect(() => {
    if (!canLoad || !end.current) return;
    const seen = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && more.current());
    seen.observe(end.current);
    return () => seen.disconnect();
  }, [canLoad, p.items?.length]);

  const assignee = (c: Conversation) =>
    c.assigneeId === null ? 'Unassigned' : c.assigneeId === p.me ? 'Assigned to you' : `Assigned to ${p.emails.get(c.assigneeId) ?? 'a member'}`;

  return (
    <section class="inbox-list" aria-labelledby="inbox-list-title">
      <h2 id="inbox-list-title" class="sr-only">
        Conversations
      </h2>
      <div class="inbox-filters" role="group" aria-label="Filters">
        <label>
          <span>State</span>
          <select value={p.filters.state} onChange={(e) => p.onFilters({ ...p.filters, state: e.currentTarget.value as Filters['state'] })}>
            <option value="open">Open</option>
            <option value="closed">Closed</option>
          </select>
        </label>
        <label>
          <span>Assigned</span>
          <select value={p.filters.assignee} onChange={(e) => p.onFilters({ ...p.filters, assignee: e.currentTarget.value as Filters['assignee'] })}>
            <option value="any">All</option>
            <option value="me">Mine</option>
            <option value="unassigned">Unassigned</option>
          </select>
        </label>
        <label class="check">
          <input type="checkbox" checked={p.filters.unread} onChange={(e) => p.onFilters({ ...p.filters, unread: e.currentTarget.checked })} />
          Unread only
        </label>
        {(tags.length > 0 || p.filters.tag) && (
          <label>
            <span>Tag</span>
            <select value={p.filters.tag ?? ''} onChange={(e) => p.onFilters({ ...p.filters, tag: e.currentTarget.value || undefined })}>
              <option value="">Any</option>
              {tags.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </select>
          </label>
        )}
      </div>
      <p class="status-line inbox-filter-notice" role="status">
        {p.notice}
      </p>
      <ErrorBanner error={p.error} />
      {p.items === null ? (
        !p.error && <p class="loading">Loading conversations…</p>
      ) : p.items.length === 0 ? (
        <EmptyState title="No conversations here.">New conversations appear at the top as visitors write.</EmptyState>
      ) : (
        <ul class="inbox-rows">
          {p.items.map((c) => {
            const v = visitorOf(c);
            const selected = c.id === p.selectedId;
            return (
              <li key={c.id}>
                <a
                  class={`inbox-row${selected ? ' inbox-row-selected' : ''}${c.unreadCount ? ' inbox-row-unread' : ''}`}
                  href={`${BASE}/sites/${p.siteId}/inbox?conversation=${c.id}`}
                  aria-current={selected ? 'true' : undefined}
                  data-conversation={c.id}
                  onClick={(e) => {
                    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
                    e.preventDefault();
                    p.onSelect(c.id);
                  }}
                >
                  <span class="inbox-row-top">
                    <span class="inbox-row-visitor" title={v.label}>
                      {c.visitorName} {c.visitorNameSource === 'verified' && <span class="tag">Verified</span>}
                    </span>
                    {c.unreadCount > 0 && (
                      <span class="badge">
                        {/* The server counts up to 999 (UNREAD_COUNT_CAP): past it, "999+". */}
                        {c.unreadCount >= 999 ? '999+' : c.unreadCount}
                        <span class="sr-only"> unread</span>
                      </span>
                    )}
                  </span>
                  {c.lastMessage && (
                    <span class="inbox-row-preview">
                      {c.lastMessage.author && <span class="inbox-row-author">{c.lastMessage.author}: </span>}
                      {c.lastMessage.attachmentCount > 0 && (
                        <span class="inbox-row-file" aria-label={`${c.lastMessage.attachmentCount} file${c.lastMessage.attachmentCount > 1 ? 's' : ''}`}>
                          📎{' '}
                        </span>
                      )}
                      {c.lastMessage.preview}
                    </span>
                  )}
                  <span class="inbox-row-meta">
                    {c.waitingSince ? (
                      <span class="inbox-row-waiting">
                        Waiting since <RelativeTime at={c.waitingSince} />
                      </span>
                    ) : (
                      c.lastAnswer && (
                        <span>
                          Answered by {c.lastAnswer.author === 'You' ? 'you' : c.lastAnswer.author} <RelativeTime at={c.lastAnswer.at} />
                        </span>
                      )
                    )}
                    <span>{assignee(c)}</span>
                    {c.state === 'closed' && <span class="tag tag-muted">Closed</span>}
                    <RelativeTime at={c.lastMessageAt ?? c.createdAt} />
                  </span>
                  <TagChips tags={c.tags} />
                </a>
              </li>
            );
          })}
        </ul>
      )}
      <div ref={end} class="inbox-list-end">
        {p.loading && p.items !== null && <p class="loading">Loading more…</p>}
        {canLoad && <Button onClick={p.onLoadMore}>Load more conversations</Button>}
      </div>
    </section>
  );
}
