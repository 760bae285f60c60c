import type { JSX, RefObject } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { call, callPage, client, type MySite } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { Link } from '../components/Link';
import { RelativeTime } from '../components/RelativeTime';
import { Composer } from './Composer';
import { VisitorPanel } from './VisitorPanel';
import { TagPicker } from './TagPicker';
import { Markdown } from './Markdown';
import { safeHref } from '../../../window/browser/markdown';
import { formatSize, mergeMessages, visitorOf, type Conversation, type Member, type Message } from './model';
import { ComposeSwitch, NoteComposer, NoteItem, useNotes } from './Notes';
import { historyItems, type HistoryItem, type Note } from './note-model';
import { isTyping } from './Shortcuts';
import { useConversationLive } from '../live/typing';

/** Messages per page of the history: the newest page first, older ones as the agent scrolls up. */
export const HISTORY_PAGE = 30;

export interface ConversationViewProps {
  site: MySite;
  me: string;
  conversation: Conversation;
  members: Member[];
  onChange: (c: Conversation) => void;
  onBack: () => void;
  /** Registers for this conversation's new messages from the live stream. */
  subscribe: (listener: (m: Message) => void) => () => void;
  /** Changes when the live stream could not resume exactly: the newest page is read again. */
  resyncTick: number;
  askClose: boolean;
  setAskClose: (ask: boolean) => void;
  replyField: RefObject<HTMLTextAreaElement>;
  onManageCanned: () => void;
  cannedVersion: number;
  /** An owner deleted the visitor's data from the side panel. */
  onVisitorDeleted?: (visitorId: string) => void;
}

/** The open conversation: who the visitor is, what can be done with it, its history and the reply. */
export function ConversationView(p: ConversationViewProps) {
  const c = p.conversation;
  const siteId = p.site.id;
  const [messages, setMessages] = useState<Message[] | null>(null);
  const [older, setOlder] = useState<string | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [assignTo, setAssignTo] = useState('');
  const [busy, setBusy] = useState(false);
  const emails = new Map(p.members.map((m) => [m.accountId, m.email]));
  // Reply to the visitor or write an internal note; a closed conversation takes notes only.
  const [mode, setMode] = useState<'reply' | 'note'>('reply');
  const notes = useNotes(siteId, c.id, p.resyncTick);
  const live = useConversationLive(siteId, c.id);
  const typists = live.typing.map((who) => (who === 'visitor' ? 'The visitor' : (emails.get(who) ?? 'A member')));
  const path = { params: { path: { siteId, conversationId: c.id } } };

  const markRead = async () => {
    try {
      await call(() => client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/read', path));
      p.onChange({ ...latest.current, unreadCount: 0 });
    } catch {
      // The count stays; the next open or reply marks it again.
    }
  };
  const latest = useRef(c);
  latest.current = c;

  // The newest page (again after a resync, merged so nothing on screen moves).
  useEffect(() => {
    let stale = false;
    void (async () => {
      try {
        const page = await callPage(() =>
          client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/messages', {
            params: { path: { siteId, conversationId: c.id }, query: { order: 'desc', limit: HISTORY_PAGE } },
          }),
        );
        if (stale) return;
        setMessages((before) => mergeMessages(before ?? [], [...page.items].reverse()));
        setOlder((before) => (p.resyncTick && before !== null ? before : page.nextCursor));
        setError(null);
        void markRead();
      } catch (err) {
        if (!stale) setError(err);
      }
    })();
    return () => {
      stale = true;
    };
  }, [c.id, p.resyncTick]);

  // New messages as they arrive; the conversation is on screen, so they are read (when the tab is seen).
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const readSoon = () => {
      clearTimeout(timer);
      timer = setTimeout(() => document.visibilityState === 'visible' && void markRead(), 400);
    };
    const off = p.subscribe((m) => {
      setMessages((before) => (before ? mergeMessages(before, [m]) : before));
      if (m.authorId !== p.me) readSoon();
    });
    const onVisible = () => document.visibilityState === 'visible' && latest.current.unreadCount > 0 && readSoon();
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      off();
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [c.id]);

  // The notes as far back as the messages loaded go (all of them once the first message is loaded).
  const from = messages && older !== null ? (messages[0]?.createdAt ?? null) : null;
  useEffect(() => {
    if (messages) void notes.reach(from);
  }, [from, messages !== null]);

  // `n` writes a note (the inbox's other shortcuts are InboxPage's); never while typing or with a dialog open.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'n' || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || isTyping(e.target) || document.querySelector('dialog[open]')) return;
      e.preventDefault();
      setMode('note');
      requestAnimationFrame(() => p.replyField.current?.focus());
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  const loadOlder = async () => {
    if (!older || loadingOlder) return;
    setLoadingOlder(true);
    try {
      const page = await callPage(() =>
        client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/messages', {
          params: { path: { siteId, conversationId: c.id }, query: { order: 'desc', limit: HISTORY_PAGE, cursor: older } },
        }),
      );
      setMessages((before) => mergeMessages([...page.items].reverse(), before ?? []));
      setOlder(page.nextCursor);
    } catch (err) {
      setError(err);
    } finally {
      setLoadingOlder(false);
    }
  };

  const act = async (run: () => Promise<Conversation>) => {
    setBusy(true);
    setActionError(null);
    try {
      p.onChange(await run());
    } catch (err) {
      setActionError(err);
    } finally {
      setBusy(false);
    }
  };
  const assign = (assigneeId: string | null) =>
    act(() => call(() => client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/assignee', { ...path, body: { assigneeId } })));

  const v = visitorOf(c);
  const owner = p.site.role === 'owner';
  const assigneeName = c.assigneeId === null ? 'nobody' : c.assigneeId === p.me ? 'you' : (emails.get(c.assigneeId) ?? c.assigneeId);

  return (
    <section class="inbox-conv" aria-labelledby="inbox-conv-title">
      <div class="inbox-conv-head">
        <Button variant="link" class="inbox-back" onClick={p.onBack}>
          ← Conversations
        </Button>
        <h2 id="inbox-conv-title">
          {c.visitorName} {c.visitorNameSource === 'verified' && <span class="tag">Verified</span>}
        </h2>
        <dl class="inbox-facts">
          <div>
            <dt>Identity</dt>
            <dd>
              {c.visitorNameSource === 'verified'
                ? 'verified by the site'
                : c.visitorNameSource === 'unverified'
                  ? 'name given by the page, not verified'
                  : 'anonymous'}{' '}
              <span class="inbox-visitor-id">{v.label}</span>
            </dd>
          </div>
          <div>
            <dt>Started</dt>
            <dd>
              <RelativeTime at={c.createdAt} />
            </dd>
          </div>
          <div>
            <dt>State</dt>
            <dd>{c.state}</dd>
          </div>
          <div>
            <dt>Assigned to</dt>
            <dd>{assigneeName}</dd>
          </div>
        </dl>
        <div class="inbox-actions">
          {c.assigneeId !== p.me && (
            <Button busy={busy} onClick={() => void assign(p.me)}>
              Assign to me
            </Button>
          )}
          {c.assigneeId !== null && (owner || c.assigneeId === p.me) && (
            <Button busy={busy} onClick={() => void assign(null)}>
              Unassign
            </Button>
          )}
          {owner && p.members.length > 0 && (
            <form
              class="inbox-assign"
              onSubmit={(e) => {
                e.preventDefault();
                if (assignTo) void assign(assignTo);
              }}
            >
              <label for="inbox-assign-to">Assign to</label>
              <select id="inbox-assign-to" value={assignTo} onChange={(e) => setAssignTo(e.currentTarget.value)}>
                <option value="">Choose a member</option>
                {p.members.map((m) => (
                  <option key={m.accountId} value={m.accountId}>
                    {m.email}
                    {m.accountId === p.me ? ' (you)' : ''}
                  </option>
                ))}
              </select>
              <Button submit busy={busy} disabled={!assignTo}>
                Assign
              </Button>
            </form>
          )}
          {c.state === 'open' && (
            <Button variant="danger" onClick={() => p.setAskClose(true)}>
              Close conversation
            </Button>
          )}
          <Link to={`/sites/${siteId}/timeline?conversation=${c.id}`}>Timeline</Link>
        </div>
        <TagPicker siteId={siteId} conversationId={c.id} tags={c.tags} onTags={(tags) => p.onChange({ ...latest.current, tags })} />
        <ErrorBanner error={actionError} />
      </div>
      <VisitorPanel siteId={siteId} conversationId={c.id} owner={owner} onDeleted={(id) => (p.onVisitorDeleted ?? p.onBack)(id)} />
      <History
        items={messages && historyItems(messages, notes.notes, from)}
        note={(n) => <NoteItem key={n.id} siteId={siteId} note={n} me={p.me} owner={owner} onChanged={notes.put} onDeleted={notes.drop} />}
        hasOlder={older !== null}
        loadingOlder={loadingOlder}
        onOlder={loadOlder}
        error={error ?? notes.error}
        seen={live.seen}
        typing={typists.length ? `${typists.join(' and ')} ${typists.length > 1 ? 'are' : 'is'} typing…` : ''}
        label={(m) =>
          m.direction === 'incoming'
            ? 'Visitor'
            : m.authorId === p.me
              ? 'You'
              : m.authorId
                ? (emails.get(m.authorId) ?? 'A member')
                : m.origin === 'api'
                  ? 'API'
                  : 'Team'
        }
      />
      {c.state === 'open' && <ComposeSwitch mode={mode} onMode={setMode} />}
      {c.state !== 'open' && <p class="inbox-closed-note">This conversation is closed: the visitor starts a new one by writing again.</p>}
      {mode === 'note' || c.state !== 'open' ? (
        <NoteComposer key={`note-${c.id}`} siteId={siteId} conversationId={c.id} me={p.me} members={p.members} field={p.replyField} onSent={notes.put} />
      ) : (
        <Composer
          key={c.id}
          siteId={siteId}
          conversationId={c.id}
          accountId={p.me}
          field={p.replyField}
          onManageCanned={p.onManageCanned}
          cannedVersion={p.cannedVersion}
          onSent={(m) => {
            setMessages((before) => mergeMessages(before ?? [], [m]));
            // Replying marks read on the server; the row follows.
            p.onChange({ ...latest.current, unreadCount: 0, lastMessageAt: m.createdAt });
          }}
        />
      )}
      {p.askClose && c.state === 'open' && (
        <ConfirmDialog
          title="Close this conversation?"
          confirm="Close conversation"
          danger
          onCancel={() => p.setAskClose(false)}
          onConfirm={async () => {
            p.onChange(await call(() => client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/close', path)));
            p.setAskClose(false);
          }}
        >
          <p>The chat window shows it closed, and replies are no longer accepted. This cannot be undone.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

interface HistoryProps {
  /** Messages and internal notes by time (note-model.ts, historyItems). */
  items: HistoryItem[] | null;
  note: (n: Note) => JSX.Element;
  hasOlder: boolean;
  loadingOlder: boolean;
  onOlder: () => void;
  error: unknown;
  label: (m: Message) => string;
  /** The newest reply the visitor was shown: "Seen" under it. */
  seen: { messageId: string; seenAt: string } | null;
  /** Who is typing, in words ('' when nobody): a line at the end of the log, announced as the log's additions are. */
  typing: string;
}

/**
 * The messages in their own scroll region, opened at the newest. Scrolling near the top loads the
 * previous page, and the view stays where it was (the added height goes above); new messages at the
 * bottom follow only when the view was at the bottom already.
 */
function History({ items: messages, note, hasOlder, loadingOlder, onOlder, error, label, seen, typing }: HistoryProps) {
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  const before = useRef<{ height: number; first: string | undefined }>({ height: 0, first: undefined });
  const older = useRef(onOlder);
  older.current = onOlder;
  const canOlder = hasOlder && !loadingOlder;

  useLayoutEffect(() => {
    const el = box.current;
    if (!el || !messages) return;
    const first = messages[0]?.id;
    const prepended = before.current.first !== undefined && first !== before.current.first;
    if (prepended) el.scrollTop += el.scrollHeight - before.current.height;
    else if (atBottom.current) el.scrollTop = el.scrollHeight;
    before.current = { height: el.scrollHeight, first };
  }, [messages, typing]);

  // A first page that does not fill the region cannot be scrolled: the next one is loaded.
  useEffect(() => {
    const el = box.current;
    if (el && messages && canOlder && el.scrollHeight <= el.clientHeight) older.current();
  }, [messages, canOlder]);

  const onScroll = () => {
    // A scroll event is dispatched at the next frame, and may come after the history left the page.
    const el = box.current;
    if (!el) return;
    atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    if (el.scrollTop < 80 && canOlder) older.current();
  };

  return (
    <div ref={box} class="inbox-history" role="log" aria-label="Messages" tabIndex={0} onScroll={onScroll}>
      <ErrorBanner error={error} />
      {messages === null ? (
        !error && <p class="loading">Loading messages…</p>
      ) : (
        <>
          <div class="inbox-history-start">
            {hasOlder ? (
              <Button variant="link" busy={loadingOlder} onClick={onOlder}>
                {loadingOlder ? 'Loading older messages…' : 'Load older messages'}
              </Button>
            ) : (
              <p class="muted">The beginning of the conversation.</p>
            )}
          </div>
          <ol class="messages">
            {messages.map((it) => {
              if (it.kind === 'note') return note(it.note);
              const m = it.message;
              return (
                <li key={m.id} class={`msg msg-${m.direction}`} data-message={m.id}>
                  <p class="msg-meta">
                    <span class="msg-author">{label(m)}</span> <RelativeTime at={m.createdAt} />
                  </p>
                  {m.content && <Markdown content={m.content} format={m.format} class="msg-body" />}
                  {m.attachments.length > 0 && (
                    <ul class="msg-files">
                      {m.attachments.map((a) => (
                        <li key={a.id}>
                          {/* The service signs these links; http(s) is all a file link may be anyway. */}
                          <a href={safeHref(a.url) ?? undefined} target="_blank" rel="noopener noreferrer">
                            {a.name}
                          </a>{' '}
                          <span class="muted">{formatSize(a.size)}</span>
                        </li>
                      ))}
                    </ul>
                  )}
                  {m.id === seen?.messageId && (
                    <p class="muted msg-seen" title={new Date(seen.seenAt).toLocaleString()}>
                      Seen
                    </p>
                  )}
                </li>
              );
            })}
          </ol>
          {typing && <p class="muted inbox-typing">{typing}</p>}
        </>
      )}
    </div>
  );
}
