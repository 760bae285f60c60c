/**
 * A conversation's timeline (`/dashboard/sites/<siteId>/timeline?conversation=conv_...`, linked from
 * the inbox, not in the navigation): its messages with who wrote each, the members' internal notes, the events each emitted and
 * every delivery attempt, oldest first, page by page. Owners redeliver an event in place and see its
 * new attempts arrive. Agents read it too (the API allows them; redelivery is for owners).
 */
import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, callPage, client, type Schemas } from '../api';
import type { PageProps } from '../types';
import { Button } from '../components/Button';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { Link } from '../components/Link';
import { RelativeTime } from '../components/RelativeTime';
import { LoadMore } from '../components/LoadMore';
import { usePagedList } from '../use-paged-list';
import { duration, Outcome } from '../events/shared';
import { groupTimeline, type AnyEntry, type AttemptEntry, type EventNode, type MessageEntry } from '../timeline/group';

const PAGE = 50;

/** The `conversation` of the address's query, following navigation within the dashboard. */
function useConversationParam(): string | null {
  const read = () => new URLSearchParams(location.search).get('conversation');
  const [id, setId] = useState(read);
  useEffect(() => {
    const update = () => setId(read());
    addEventListener('popstate', update);
    addEventListener('dashboard:navigate', update); // router.ts's navigation event
    return () => {
      removeEventListener('popstate', update);
      removeEventListener('dashboard:navigate', update);
    };
  }, []);
  return id;
}

export function TimelinePage(props: PageProps) {
  const conversationId = useConversationParam();
  if (!conversationId || !/^conv_[0-9a-z]{26}$/.test(conversationId))
    return (
      <EmptyState title="Which conversation?">
        Open a conversation’s timeline from the <Link to={`/sites/${props.site.id}/inbox`}>inbox</Link>; its address ends in <code>?conversation=conv_…</code>.
      </EmptyState>
    );
  return <Timeline key={conversationId} {...props} conversationId={conversationId} />;
}

function Timeline({ site, me, conversationId }: PageProps & { conversationId: string }) {
  const [contents, setContents] = useState<Map<string, string>>(new Map());
  const [emails, setEmails] = useState<Map<string, string>>(new Map());
  const path = { siteId: site.id, conversationId };

  // Its cursor is a pair: the timeline's, and the messages' whose text it shows.
  const list = usePagedList<AnyEntry, { timeline: string; messages: string | null }>(
    async (cursor) => {
      const page = await callPage(() =>
        client.GET('/sites/{siteId}/conversations/{conversationId}/timeline', {
          params: { path, query: { limit: PAGE, ...(cursor ? { cursor: cursor.timeline } : {}) } },
        }),
      );
      // The messages' text, page for page (both lists page by message, oldest first); without it, ids only.
      let messagesNext: string | null = null;
      if (!cursor || cursor.messages)
        try {
          const msgs = await callPage(() =>
            client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/messages', {
              params: { path, query: { order: 'asc', limit: PAGE, ...(cursor?.messages ? { cursor: cursor.messages } : {}) } },
            }),
          );
          messagesNext = msgs.nextCursor;
          setContents((before) => new Map([...before, ...msgs.items.map((m): [string, string] => [m.id, m.content])]));
        } catch {
          // the timeline is what matters here
        }
      return { items: page.items as AnyEntry[], nextCursor: page.nextCursor ? { timeline: page.nextCursor, messages: messagesNext } : null };
    },
    [conversationId],
  );
  const { items: entries, error } = list;
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/members', { params: { path: { siteId: site.id } } })).then(
      (members) => setEmails(new Map(members.map((m) => [m.accountId, m.email]))),
      () => undefined,
    );
  }, [conversationId]);

  const nodes = entries ? groupTimeline(entries) : [];
  const owner = site.role === 'owner';
  const author = (m: MessageEntry) => {
    const a = m.author;
    if (a.type === 'visitor') return 'Visitor';
    if (a.type === 'api_key') return a.apiKeyLabel ? `API key “${a.apiKeyLabel}”` : a.apiKeyId ? `API key ${a.apiKeyId}` : 'An API key';
    if (!a.accountId) return 'A member (not recorded)';
    return a.accountId === me.account.id ? `${me.account.email} (you)` : (emails.get(a.accountId) ?? a.accountId);
  };

  return (
    <div class="stack">
      <p>
        Conversation <code>{conversationId}</code>: each message, who wrote it, the team's internal notes, the events it emitted and every delivery attempt,
        oldest first.
      </p>
      <ErrorBanner error={error} />
      {entries === null ? (
        !error && <p class="loading">Loading the timeline…</p>
      ) : nodes.length === 0 ? (
        <EmptyState title="Nothing on this timeline yet." />
      ) : (
        <ol class="timeline" aria-label="Timeline, oldest first">
          {nodes.map((n, i) =>
            n.kind === 'message' ? (
              <li key={n.message.messageId} class="tl-message">
                <p class="tl-head">
                  <strong>{author(n.message)}</strong>{' '}
                  <span class="muted">
                    {n.message.direction === 'incoming' ? 'to the site' : 'to the visitor'} via {n.message.origin} · <RelativeTime at={n.message.at} />
                  </span>
                </p>
                {contents.has(n.message.messageId) && <p class="tl-content">{clip(contents.get(n.message.messageId)!)}</p>}
                <p class="muted small">
                  <code>{n.message.messageId}</code>
                </p>
                {n.events.length > 0 && (
                  <ul class="tl-events" aria-label="Events it emitted">
                    {n.events.map((e) => (
                      <EventItem key={e.event.eventId} siteId={site.id} node={e} owner={owner} />
                    ))}
                  </ul>
                )}
              </li>
            ) : n.kind === 'event' ? (
              <li key={n.node.event.eventId} class="tl-plain">
                <ul class="tl-events">
                  <EventItem siteId={site.id} node={n.node} owner={owner} />
                </ul>
              </li>
            ) : n.kind === 'replay' ? (
              <li key={`replay-${i}`} class="tl-plain">
                <p class="tl-head">
                  <strong>Replayed</strong>{' '}
                  <span class="muted">
                    {n.entry.by.type === 'api_key'
                      ? n.entry.by.apiKeyLabel
                        ? `API key “${n.entry.by.apiKeyLabel}”`
                        : 'an API key'
                      : n.entry.by.accountId === me.account.id
                        ? 'you'
                        : (emails.get(n.entry.by.accountId ?? '') ?? 'a member')}{' '}
                    retried with the same Idempotency-Key (fingerprint <code>{n.entry.idempotencyKeyFingerprint}</code>) and got the stored answer,{' '}
                    {n.entry.status}
                    {n.entry.messageId ? (
                      <>
                        {' '}
                        for <code>{n.entry.messageId}</code>
                      </>
                    ) : null}
                    ; nothing was written again · <RelativeTime at={n.entry.at} />
                  </span>
                </p>
              </li>
            ) : n.kind === 'note' ? (
              <li key={n.entry.noteId} class="tl-note">
                <p class="tl-head">
                  <strong>Internal note</strong>{' '}
                  <span class="muted">
                    by {n.entry.authorId === me.account.id ? 'you' : n.entry.authorName}, not shown to the visitor · <RelativeTime at={n.entry.at} />
                    {n.entry.editedAt && ' · edited'}
                  </span>
                </p>
                <p class="tl-content">{clip(n.entry.content)}</p>
              </li>
            ) : (
              <li key={`other-${i}`} class="tl-other">
                <OtherEntry entry={n.entry} />
              </li>
            ),
          )}
        </ol>
      )}
      <LoadMore list={list} label="Show later messages" />
    </div>
  );
}

const clip = (s: string) => (s.length > 280 ? `${s.slice(0, 280)}…` : s);

/** An entry of a kind this page does not know: its type, time and fields, so nothing is hidden. */
function OtherEntry({ entry }: { entry: AnyEntry }) {
  const { type, at, ...rest } = entry;
  const words = String(type).replace(/[_.]/g, ' ');
  return (
    <>
      <p class="tl-head">
        <strong>{words.charAt(0).toUpperCase() + words.slice(1)}</strong> {typeof at === 'string' && <RelativeTime at={at} />}
      </p>
      <dl class="facts small">
        {Object.entries(rest).map(([k, v]) => (
          <Fragment key={k}>
            <dt>{k}</dt>
            <dd>{v === null ? 'none' : typeof v === 'object' ? JSON.stringify(v) : String(v)}</dd>
          </Fragment>
        ))}
      </dl>
    </>
  );
}

function EventItem({ siteId, node, owner }: { siteId: string; node: EventNode; owner: boolean }) {
  const [live, setLive] = useState<{ outcome: Schemas['DeliveryOutcome']; attempts: AttemptEntry[] } | null>(null);
  const [said, setSaid] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const alive = useRef(true);
  useEffect(() => () => void (alive.current = false), []);
  const { event } = node;
  const outcome = live?.outcome ?? event.delivery;
  const attempts = live?.attempts ?? node.attempts;
  const params = { params: { path: { siteId, eventId: event.eventId } } };

  /** Redelivers, then follows the delivery until its new attempts settle. */
  const redeliver = async () => {
    setBusy(true);
    setError(null);
    try {
      const queued = await call(() => client.POST('/sites/{siteId}/deliveries/{eventId}/redeliver', params));
      setSaid(queued.eventIds.length ? 'Queued again: sending…' : 'It is being sent right now: not queued twice.');
      for (let i = 0; i < 40 && alive.current && queued.eventIds.length; i++) {
        await new Promise((r) => setTimeout(r, 1500));
        const d = await call(() => client.GET('/sites/{siteId}/deliveries/{eventId}', params));
        setLive({
          outcome: d.delivery.outcome,
          attempts: d.attempts.map((a) => ({
            type: 'attempt',
            at: a.startedAt,
            eventId: event.eventId,
            attempt: a.attempt,
            outcome: a.status !== null && a.status >= 200 && a.status < 300 ? 'delivered' : 'failed',
            status: a.status,
            error: a.error,
            durationMs: a.durationMs,
          })),
        });
        if (d.delivery.outcome !== 'pending' && d.attempts.length > attempts.length) {
          setSaid(d.delivery.outcome === 'delivered' ? 'Redelivered: delivered.' : 'Redelivered: it failed again.');
          break;
        }
      }
    } catch (err) {
      setError(err);
    } finally {
      if (alive.current) setBusy(false);
    }
  };

  return (
    <li class="tl-event">
      <p class="tl-head">
        Emitted <code>{event.event}</code> <Outcome outcome={outcome} /> <RelativeTime at={event.at} />
        {owner && outcome !== null && (
          <Button busy={busy} onClick={redeliver} aria-label={`Redeliver ${event.eventId}`} class="btn-small">
            Redeliver
          </Button>
        )}
      </p>
      <p role="status" class="small">
        {said}
      </p>
      <ErrorBanner error={error} />
      {attempts.length > 0 && (
        <ol class="tl-attempts" aria-label={`Attempts of ${event.eventId}`}>
          {attempts.map((a) => (
            <li key={a.attempt}>
              Attempt {a.attempt} <Outcome outcome={a.outcome} /> {a.status ?? 'no answer'} · {duration(a.durationMs)}
              {a.error && <> · {a.error}</>} · <RelativeTime at={a.at} />
            </li>
          ))}
        </ol>
      )}
    </li>
  );
}
