/**
 * The inbox's side panel (issue 25, item 3): who the visitor of the open conversation is and where
 * they are, from `getInboxVisitor`. The display name with where it came from; email; the visitor's
 * local time (ticking, from the time zone the window reported), language, browser and OS; when
 * first and last seen; the page they are on and the pages of this visit with the time on each; the
 * identity's attributes marked verified or not; their other conversations, each opening in the
 * inbox; for owners, deleting the visitor's data. It follows the visitor live: the inbox stream's
 * `visitor.context` for this conversation reads the panel again. Beside the conversation from
 * 80em, folded under its header below that.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { Link } from '../components/Link';
import { RelativeTime } from '../components/RelativeTime';
import { safeHref } from '../../../window/browser/markdown';
import { subscribeInbox } from '../live/inbox-stream';

type Visitor = Schemas['InboxVisitor'];
type Page = Schemas['VisitorPage'];

export interface VisitorPanelProps {
  siteId: string;
  conversationId: string;
  owner: boolean;
  /** The visitor's data was deleted: their conversations leave the list. */
  onDeleted: (visitorId: string) => void;
}

/** "2 min", "1 h 5 min", "40 s": time spent on a page. */
export function duration(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** The time now in `timeZone` ("14:05, Wed"), or null when the zone is unknown to this browser. */
export function localTime(timeZone: string, at = new Date()): string | null {
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone, hour: '2-digit', minute: '2-digit', weekday: 'short' }).format(at);
  } catch {
    return null;
  }
}

function languageName(tag: string): string {
  try {
    const name = new Intl.DisplayNames(['en'], { type: 'language' }).of(tag);
    return name && name !== tag ? `${name} (${tag})` : tag;
  } catch {
    return tag;
  }
}

const SOURCE: Record<Visitor['nameSource'], string> = {
  verified: 'verified',
  unverified: 'unverified: given by the page',
  generated: 'anonymous: a name made from the visitor’s id',
};

/** A page as a link that opens in a new tab (never a script: http(s) only, as the service keeps it). */
function PageLink({ page }: { page: Page }) {
  const href = safeHref(page.url);
  const label = page.title || page.url.replace(/^https?:\/\//, '');
  return href ? (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow" title={page.url}>
      {label}
    </a>
  ) : (
    <span>{label}</span>
  );
}

function Verified({ verified }: { verified: boolean }) {
  return <span class={`visitor-mark${verified ? ' visitor-mark-ok' : ''}`}>{verified ? 'verified' : 'unverified'}</span>;
}

export function VisitorPanel({ siteId, conversationId, owner, onDeleted }: VisitorPanelProps) {
  const [v, setV] = useState<Visitor | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [expanded, setExpanded] = useState(false);
  const [askDelete, setAskDelete] = useState(false);
  const [, setTick] = useState(0);
  const generation = useRef(0);

  const load = async () => {
    const mine = ++generation.current;
    try {
      const data = await call(() =>
        client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/visitor', { params: { path: { siteId, conversationId } } }),
      );
      if (mine !== generation.current) return;
      setV(data);
      setError(null);
    } catch (err) {
      if (mine === generation.current) setError(err);
    }
  };

  useEffect(() => {
    setV(null);
    void load();
    // Live: the visitor moved or said more of itself; a burst of moves reads the panel once.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const off = subscribeInbox(siteId, (e) => {
      if (e.name !== 'visitor.context') return;
      const data = e.data as Schemas['InboxVisitorContextEvent'] | null;
      if (data?.conversationId !== conversationId) return;
      clearTimeout(timer);
      timer = setTimeout(() => void load(), 250);
    });
    // The local time and the time on the current page move on.
    const clock = setInterval(() => setTick((n) => n + 1), 30_000);
    return () => {
      off();
      clearTimeout(timer);
      clearInterval(clock);
    };
  }, [siteId, conversationId]);

  const current = v?.pages.at(-1) ?? null;
  const env = v?.environment ?? null;
  const zoneTime = env?.timeZone ? localTime(env.timeZone) : null;
  const browser =
    env &&
    [
      env.browser && `${env.browser}${env.browserVersion ? ` ${env.browserVersion.split('.')[0]}` : ''}`,
      env.os && `${env.os}${env.osVersion ? ` ${env.osVersion}` : ''}`,
    ]
      .filter(Boolean)
      .join(' on ');

  return (
    <aside tabIndex={0} class={`visitor-panel${expanded ? ' expanded' : ''}`} aria-labelledby="visitor-panel-title">
      <h3 id="visitor-panel-title" class="visitor-panel-title">
        <button type="button" class="visitor-panel-toggle" aria-expanded={expanded} aria-controls="visitor-panel-body" onClick={() => setExpanded(!expanded)}>
          Visitor{v ? `: ${v.displayName}` : ''}
          {current && <span class="muted"> · on {current.title || current.url}</span>}
        </button>
        <span class="visitor-panel-heading">Visitor</span>
      </h3>
      <div id="visitor-panel-body" class="visitor-panel-body">
        <ErrorBanner error={error} />
        {!v ? (
          !error && <p class="loading">Loading the visitor…</p>
        ) : (
          <>
            <p class="visitor-name">
              <strong>{v.displayName}</strong> <span class="muted">({SOURCE[v.nameSource]})</span>
            </p>
            <dl class="visitor-facts">
              {v.email && (
                <>
                  <dt>Email</dt>
                  <dd>
                    {v.email} <Verified verified={v.emailVerified} />
                    {v.replyEmails !== 'none' && (
                      <span class="muted"> ({v.replyEmails === 'subscribed' ? 'replies emailed' : 'unsubscribed from reply emails'})</span>
                    )}
                  </dd>
                </>
              )}
              {env?.timeZone && (
                <>
                  <dt>Local time</dt>
                  <dd>
                    {zoneTime ?? '?'} <span class="muted">({env.timeZone})</span>
                  </dd>
                </>
              )}
              {env?.language && (
                <>
                  <dt>Language</dt>
                  <dd>{languageName(env.language)}</dd>
                </>
              )}
              {browser && (
                <>
                  <dt>Browser</dt>
                  <dd>
                    {browser}
                    {env?.device && env.device !== 'desktop' ? ` (${env.device})` : ''}
                  </dd>
                </>
              )}
              <dt>First seen</dt>
              <dd>
                <RelativeTime at={v.firstSeenAt} />
              </dd>
              <dt>Last seen</dt>
              <dd>
                <RelativeTime at={v.lastSeenAt} />
              </dd>
              <dt>Identity</dt>
              <dd>
                {v.identityVerified ? 'verified by the site' : 'anonymous'} <span class="visitor-id">{v.visitorId}</span>
              </dd>
            </dl>

            <h4>Current page</h4>
            {!v.pageTracking && <p class="muted">Page tracking is off for this site.</p>}
            {v.pageTracking &&
              (current ? (
                <p class="visitor-current" data-url={current.url}>
                  <PageLink page={current} /> <span class="muted">since</span> <RelativeTime at={current.viewedAt} />
                </p>
              ) : (
                <p class="muted">Not reported yet: the window reports pages while a conversation is open.</p>
              ))}
            {v.pages.length > 1 && (
              <>
                <h4>This visit ({v.pages.length} pages)</h4>
                <ol class="visitor-pages" reversed>
                  {[...v.pages].reverse().map((p) => (
                    <li key={`${p.viewedAt}${p.url}`}>
                      <PageLink page={p} /> <span class="muted">{p.durationSeconds === null ? 'now' : duration(p.durationSeconds)}</span>
                    </li>
                  ))}
                </ol>
                {v.pages[0].referrer && (
                  <p class="muted">
                    Came from <span class="visitor-referrer">{v.pages[0].referrer}</span>
                  </p>
                )}
              </>
            )}

            {v.attributes.length > 0 && (
              <>
                <h4>Attributes</h4>
                <dl class="visitor-attributes">
                  {v.attributes.map((a) => (
                    <div key={a.name}>
                      <dt>{a.name}</dt>
                      <dd>
                        {String(a.value)} <Verified verified={a.verified} />
                      </dd>
                    </div>
                  ))}
                </dl>
              </>
            )}

            <h4>Other conversations</h4>
            {v.conversations.length === 0 ? (
              <p class="muted">None.</p>
            ) : (
              <ul class="visitor-conversations">
                {v.conversations.map((c) => (
                  <li key={c.id}>
                    <Link to={`/sites/${siteId}/inbox?conversation=${c.id}`}>
                      Started <RelativeTime at={c.createdAt} />
                    </Link>{' '}
                    <span class="muted">{c.state}</span>
                  </li>
                ))}
                {v.moreConversations && <li class="muted">and more</li>}
              </ul>
            )}

            {owner && (
              <div class="visitor-delete">
                <Button variant="danger" onClick={() => setAskDelete(true)}>
                  Delete visitor’s data
                </Button>
              </div>
            )}
          </>
        )}
      </div>
      {askDelete && v && (
        <ConfirmDialog
          title="Delete this visitor’s data?"
          confirm="Delete everything"
          danger
          onCancel={() => setAskDelete(false)}
          onConfirm={async () => {
            await call(() => client.POST('/sites/{siteId}/visitor-deletions', { params: { path: { siteId } }, body: { visitorId: v.visitorId } }));
            setAskDelete(false);
            onDeleted(v.visitorId);
          }}
        >
          <p>
            All conversations of {v.displayName} ({v.conversations.length + 1}
            {v.moreConversations ? ' or more' : ''}), their messages and files, the pages and browser the window reported, and the name, email and attributes
            are deleted for good. No event is sent: integrations keep their own copies. This is written to the audit log and cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </aside>
  );
}
