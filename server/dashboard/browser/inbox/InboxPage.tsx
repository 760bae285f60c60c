/**
 * The inbox (issue 19, items 2, 9's link and 10): the conversation list with the member's unread
 * counts and filters, paged as it scrolls; the open conversation (`?conversation=<id>` in the
 * address, so a reload or a link opens it) with its history paged upwards, the visitor, assign,
 * close and the reply; live updates from live/inbox-stream.ts; keyboard shortcuts. Two panes from
 * 48em, one pane with a way back on a phone. The search (issue 25, item 2) is a filter of the list,
 * kept in the address (`?q=`).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, callPage, client } from '../api';
import type { PageProps } from '../types';
import { navigate } from '../router';
import { Button } from '../components/Button';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { onResync, subscribeInbox, type InboxLiveEvent } from '../live/inbox-stream';
import { ImportOffer, SharedRepliesEditor } from './SharedReplies';
import { ConversationList } from './ConversationList';
import { ConversationView } from './ConversationView';
import { isTyping, ShortcutsSheet } from './Shortcuts';
import {
  applyToRow,
  conversationIdOf,
  DEFAULT_FILTERS,
  inboxUrl,
  listQuery,
  matches,
  messageOf,
  openDelay,
  searchFromUrl,
  tagOfEvent,
  withRow,
  type Conversation,
  type Filters,
  type Member,
  type Message,
} from './model';

/** Conversations per page of the list. */
export const LIST_PAGE = 25;
/** A search runs this long after the last key press (or at once on Enter). */
const SEARCH_DELAY_MS = 300;

const selectedFromUrl = () => {
  const id = new URLSearchParams(location.search).get('conversation');
  return id && /^conv_[0-9a-z]{26}$/.test(id) ? id : null;
};

export function InboxPage({ site, me }: PageProps) {
  const myId = me.account.id;
  const [filters, setFilters] = useState<Filters>(() => ({ ...DEFAULT_FILTERS, q: searchFromUrl(location.search) }));
  const [draft, setDraft] = useState(filters.q ?? '');
  const searchField = useRef<HTMLInputElement>(null);
  const [items, setItems] = useState<Conversation[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [listError, setListError] = useState<unknown>(null);
  const [selectedId, setSelectedId] = useState<string | null>(selectedFromUrl);
  const [open, setOpen] = useState<Conversation | null>(null);
  const [openError, setOpenError] = useState<unknown>(null);
  const [members, setMembers] = useState<Member[]>([]);
  const [askClose, setAskClose] = useState(false);
  const [sheet, setSheet] = useState(false);
  const [editingCanned, setEditingCanned] = useState(false);
  const [cannedVersion, setCannedVersion] = useState(0);
  const [resyncTick, setResyncTick] = useState(0);
  /** Why the list's filters changed without the member (its tag deleted by an owner). */
  const [filterNotice, setFilterNotice] = useState<string | null>(null);
  const replyField = useRef<HTMLTextAreaElement>(null);

  // The newest state for the live handler and the key handler, which are registered once.
  // What the main pane shows and the shortcuts act on: never a conversation the selection has left
  // (the one opened lags behind a selection moving fast, model.ts's openDelay).
  const shown = open && open.id === selectedId ? open : null;
  const now = useRef({ filters, items, selectedId, shown, cursor });
  now.current = { filters, items, selectedId, shown, cursor };

  // Each list load is numbered: an answer for filters changed meanwhile is dropped.
  const generation = useRef(0);
  const loadList = async (from: string | null) => {
    const mine = from === null ? ++generation.current : generation.current;
    const f = now.current.filters;
    setLoading(true);
    setListError(null);
    try {
      const page = await callPage(() =>
        client.GET('/sites/{siteId}/inbox/conversations', {
          params: {
            path: { siteId: site.id },
            query: listQuery(f, LIST_PAGE, from),
          },
        }),
      );
      if (mine !== generation.current) return;
      setItems((before) => {
        if (!from || !before) return page.items;
        const have = new Set(before.map((c) => c.id));
        return [...before, ...page.items.filter((c) => !have.has(c.id))];
      });
      setCursor(page.nextCursor);
    } catch (err) {
      if (mine === generation.current) setListError(err);
    } finally {
      if (mine === generation.current) setLoading(false);
    }
  };

  useEffect(() => {
    setItems(null);
    setCursor(null);
    void loadList(null);
  }, [filters, resyncTick]);

  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/members', { params: { path: { siteId: site.id } } })).then(setMembers, () => undefined);
  }, [site.id]);

  // The open conversation follows the address (links, back and forward).
  useEffect(() => {
    const follow = () => {
      const id = selectedFromUrl();
      if (!id) entered.current = false;
      setSelectedId(id);
      const q = searchFromUrl(location.search);
      setFilters((f) => (f.q === q ? f : { ...f, q }));
      setDraft((d) => (d.trim() === (q ?? '') ? d : (q ?? '')));
    };
    addEventListener('popstate', follow);
    addEventListener('dashboard:navigate', follow);
    return () => {
      removeEventListener('popstate', follow);
      removeEventListener('dashboard:navigate', follow);
    };
  }, []);

  // The conversation opened: the selected one, once the selection rests (model.ts, openDelay).
  const [openedId, setOpenedId] = useState<string | null>(selectedId);
  const selectedAt = useRef<number | null>(null);
  useEffect(() => {
    const at = performance.now();
    const delay = selectedId ? openDelay(selectedAt.current, at) : 0;
    selectedAt.current = at;
    if (!delay) return setOpenedId(selectedId);
    const timer = setTimeout(() => setOpenedId(selectedId), delay);
    return () => clearTimeout(timer);
  }, [selectedId]);

  useEffect(() => {
    setAskClose(false);
    setOpenError(null);
    if (!openedId) return setOpen(null);
    setOpen(now.current.items?.find((c) => c.id === openedId) ?? null);
    let stale = false;
    call(() => client.GET('/sites/{siteId}/inbox/conversations/{conversationId}', { params: { path: { siteId: site.id, conversationId: openedId } } })).then(
      (c) => !stale && setOpen(c),
      (err) => !stale && setOpenError(err),
    );
    return () => {
      stale = true;
    };
  }, [openedId, resyncTick]);

  // Whether the open conversation was entered from the list in this page (a history entry of ours).
  const entered = useRef(false);
  const select = (id: string | null) => {
    const base = `/sites/${site.id}/inbox`;
    if (!id && entered.current) {
      // Back to the list is the browser's Back: the phone's back gesture and this button agree.
      entered.current = false;
      return history.back();
    }
    // From the list into a conversation is a step Back undoes; between conversations it is not.
    entered.current ||= Boolean(id && !now.current.selectedId);
    navigate(inboxUrl(base, id, now.current.filters.q), Boolean(!id || now.current.selectedId));
  };

  /** Runs the search in the field (empty: none), keeping it in the address without a history step of its own. */
  const search = (text: string) => {
    const q = text.trim() || undefined;
    if (q === now.current.filters.q) return;
    setFilters((f) => ({ ...f, q }));
    navigate(inboxUrl(`/sites/${site.id}/inbox`, now.current.selectedId, q), true);
  };
  useEffect(() => {
    // As the member types: once the words are long enough to match (3 characters), or cleared.
    const text = draft.trim();
    if (text.length > 0 && text.length < 3) return;
    const timer = setTimeout(() => search(text), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [draft]);

  /** A conversation changed here (read, assigned, closed, replied): its row and the open card follow. */
  const changed = (c: Conversation) => {
    setItems((rows) => rows?.map((r) => (r.id === c.id ? c : r)) ?? rows);
    setOpen((o) => (o?.id === c.id ? c : o));
  };

  // Live: the open conversation's view registers here for its messages.
  const messageListeners = useRef(new Set<(m: Message) => void>());
  /** Conversations whose row summary is being read again after a new message (true: read once more). */
  const summaries = useRef(new Map<string, boolean>());
  const readSummary = async (id: string) => {
    try {
      do {
        summaries.current.set(id, false);
        const c = await call(() =>
          client.GET('/sites/{siteId}/inbox/conversations/{conversationId}', { params: { path: { siteId: site.id, conversationId: id } } }),
        );
        const { visitorName, visitorNameSource, lastMessage, waitingSince, lastAnswer } = c;
        const summary = (r: Conversation): Conversation => (r.id === id ? { ...r, visitorName, visitorNameSource, lastMessage, waitingSince, lastAnswer } : r);
        setItems((rows) => rows?.map(summary) ?? rows);
        setOpen((o) => o && summary(o));
      } while (summaries.current.get(id));
    } catch {
      // The row keeps its older summary until the list is read again.
    } finally {
      summaries.current.delete(id);
    }
  };
  useEffect(() => {
    const onEvent = async (e: InboxLiveEvent) => {
      // A conversation open in a hidden tab is not being read: its new messages count as unread
      // (the title shows them) until the tab is seen and marks it read.
      const ctx = { me: myId, openId: document.visibilityState === 'visible' ? now.current.selectedId : null };
      const m = messageOf(e);
      if (m && m.conversationId === now.current.selectedId) for (const l of messageListeners.current) l(m);
      // The tab title's count and the notifications are the header's (live/status.tsx), on every page.
      setItems((rows) => rows?.map((c) => applyToRow(c, e, ctx)) ?? rows);
      setOpen((o) => (o ? applyToRow(o, e, ctx) : o));
      const gone = e.name === 'tag.deleted' ? tagOfEvent(e) : null;
      if (gone && now.current.filters.tag === gone.id) {
        setFilters((f) => ({ ...f, tag: undefined }));
        setFilterNotice(`The tag “${gone.name}” was deleted: the list no longer filters by it.`);
      }
      const id = conversationIdOf(e);
      // What a row says of the last message is the server's (the preview's rules live there): read
      // again; a message arriving during the read asks for one more read after it.
      if (e.name === 'message.created' && id && now.current.items?.some((c) => c.id === id)) {
        if (summaries.current.has(id)) summaries.current.set(id, true);
        else void readSummary(id);
      }
      // A conversation not in the list may join it: a new one, or one given the tag the list is filtered by.
      const tagged = e.name === 'conversation.tagged' && Array.isArray(e.data.tags) && e.data.tags.some((t) => t.id === now.current.filters.tag);
      if ((e.name === 'conversation.started' || tagged) && id && !now.current.items?.some((c) => c.id === id)) {
        try {
          const c = await call(() =>
            client.GET('/sites/{siteId}/inbox/conversations/{conversationId}', { params: { path: { siteId: site.id, conversationId: id } } }),
          );
          if (matches(c, now.current.filters, myId)) setItems((rows) => rows && withRow(rows, c, now.current.cursor !== null));
        } catch {
          // Not readable (gone, or no longer a member): the list stays as it is.
        }
      }
    };
    const offEvents = subscribeInbox(site.id, (e) => void onEvent(e));
    const offResync = onResync(site.id, () => setResyncTick((n) => n + 1));
    return () => {
      offEvents();
      offResync();
    };
  }, [site.id]);

  // Keyboard shortcuts (the `?` sheet lists them); never while typing in a field or with a dialog open.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
      if (isTyping(e.target)) {
        if (e.key === 'Escape' && e.target === replyField.current) document.querySelector<HTMLElement>('.inbox-history')?.focus();
        return;
      }
      if (document.querySelector('dialog[open]')) return;
      const { items: rows, selectedId: sel, shown: o } = now.current;
      switch (e.key) {
        case 'j':
        case 'k': {
          if (!rows?.length) return;
          const at = rows.findIndex((c) => c.id === sel);
          const next = at < 0 ? 0 : Math.min(rows.length - 1, Math.max(0, at + (e.key === 'j' ? 1 : -1)));
          const inList = document.activeElement?.closest('.inbox-rows');
          select(rows[next].id);
          requestAnimationFrame(() => {
            const row = document.querySelector<HTMLElement>(`[data-conversation="${rows[next].id}"]`);
            row?.scrollIntoView({ block: 'nearest' });
            if (inList) row?.focus();
          });
          break;
        }
        case 'r':
          if (!replyField.current) return;
          replyField.current.focus();
          break;
        case 'e':
          if (o?.state !== 'open') return;
          setAskClose(true);
          break;
        case '?':
          setSheet(true);
          break;
        case '/':
          searchField.current?.focus();
          break;
        default:
          return;
      }
      e.preventDefault();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  const subscribeMessages = (l: (m: Message) => void) => {
    messageListeners.current.add(l);
    return () => void messageListeners.current.delete(l);
  };

  return (
    <div class={`inbox${selectedId ? ' inbox-has-open' : ''}`}>
      <div class="inbox-bar">
        <form
          role="search"
          class="inbox-search"
          onSubmit={(e) => {
            e.preventDefault();
            search(draft);
          }}
        >
          <input
            ref={searchField}
            type="search"
            aria-label="Search conversations"
            aria-keyshortcuts="/"
            placeholder="Search messages, notes, names, emails, ids"
            maxLength={200}
            value={draft}
            onInput={(e) => setDraft(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key !== 'Escape') return;
              // Esc clears a search, then leaves the field for the list's shortcuts.
              e.preventDefault();
              if (draft) {
                setDraft('');
                search('');
              } else searchField.current?.blur();
            }}
          />
        </form>
        <Button variant="link" class="inbox-keys" onClick={() => setSheet(true)} aria-keyshortcuts="?">
          Keyboard shortcuts
        </Button>
      </div>
      <ImportOffer siteId={site.id} accountId={myId} role={site.role} onImported={() => setCannedVersion((n) => n + 1)} />
      <div class="inbox-panes">
        <ConversationList
          siteId={site.id}
          me={myId}
          items={items}
          selectedId={selectedId}
          filters={filters}
          onFilters={(f) => {
            setFilterNotice(null);
            setFilters(f);
          }}
          notice={filterNotice}
          hasMore={cursor !== null}
          loading={loading}
          error={listError}
          onLoadMore={() => cursor && !loading && void loadList(cursor)}
          onSelect={select}
          emails={new Map(members.map((m) => [m.accountId, m.email]))}
        />
        <div class="inbox-main">
          {openError && openedId === selectedId ? (
            <div class="stack">
              <Button variant="link" class="inbox-back" onClick={() => select(null)}>
                ← Conversations
              </Button>
              <ErrorBanner error={openError} />
            </div>
          ) : shown ? (
            <ConversationView
              key={shown.id}
              site={site}
              me={myId}
              conversation={shown}
              members={members}
              onChange={changed}
              onBack={() => select(null)}
              subscribe={subscribeMessages}
              resyncTick={resyncTick}
              askClose={askClose}
              setAskClose={setAskClose}
              replyField={replyField}
              onManageCanned={() => setEditingCanned(true)}
              cannedVersion={cannedVersion}
              onVisitorDeleted={(visitorId) => {
                setItems((rows) => rows?.filter((r) => r.visitorId !== visitorId) ?? rows);
                select(null);
              }}
            />
          ) : selectedId ? (
            <p class="loading">Loading the conversation…</p>
          ) : (
            <EmptyState title="No conversation open.">Choose one in the list, or press j. Press ? for the keyboard shortcuts.</EmptyState>
          )}
        </div>
      </div>
      {sheet && <ShortcutsSheet onClose={() => setSheet(false)} />}
      {editingCanned && (
        <SharedRepliesEditor
          siteId={site.id}
          role={site.role}
          onClose={() => {
            setEditingCanned(false);
            setCannedVersion((n) => n + 1);
          }}
        />
      )}
    </div>
  );
}
