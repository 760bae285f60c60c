/**
 * The header's live slot: the connection state in words (announced politely by screen readers),
 * "N updates while offline" for a moment after a catch-up, and the notification settings. It also
 * keeps the current site's inbox stream open on every page (not only the inbox), so the title's
 * unread count and the notifications work wherever the member is. This is the one place that
 * calls `setUnreadTotal` and `announce`: the count and the notifications come from one source.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, client } from '../api';
import { usePath } from '../router';
import { useCatchUp, useConnection, type ConnectionState } from '../connection';
import { onResync, subscribeInbox, type InboxLiveEvent } from './inbox-stream';
import { readsStream } from './hub';
import { announce, NotificationSettings, setUnreadTotal } from './notifications';
import { Mentions } from './mentions';

const LABEL: Record<ConnectionState, string> = {
  none: '',
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  offline: 'Offline, retrying',
};
/** How long "N updates while offline" stays in the header. */
const CATCH_UP_SHOWN_MS = 8_000;
/** Events in a burst make one count request. */
const RECOUNT_AFTER_MS = 400;

interface MessageData {
  conversation?: { id?: string };
  message?: { conversationId?: string; direction?: string; authorId?: string | null; content?: string; attachments?: unknown[] };
}

/** A message a visitor wrote (the chat window's are `origin: widget`; an integration's incoming ones count too); never a member's reply. */
function visitorMessage(e: InboxLiveEvent): { conversationId: string; body: string } | null {
  if (e.name !== 'message.created') return null;
  const m = (e.data as MessageData | null)?.message;
  if (!m || m.direction !== 'incoming' || m.authorId) return null;
  const conversationId = m.conversationId ?? (e.data as MessageData).conversation?.id;
  if (!conversationId) return null;
  const body = m.content?.trim() || (m.attachments?.length ? 'Sent a file.' : 'New message');
  return { conversationId, body };
}

/** The open conversations with unread messages, summed (capped at a page of 100: the title shows "99+" past 99 anyway). */
async function countUnread(siteId: string): Promise<number> {
  const list = await call(() =>
    client.GET('/sites/{siteId}/inbox/conversations', { params: { path: { siteId }, query: { state: 'open', unread: true, limit: 100 } } }),
  );
  return list.reduce((sum, c) => sum + c.unreadCount, 0);
}

export function LiveStatus({ siteId }: { siteId: string | undefined }) {
  const connection = useConnection();
  const path = usePath();
  const [recount, setRecount] = useState<(() => void) | null>(null);
  const catchUp = useCatchUp();
  const [shownCatchUp, setShownCatchUp] = useState<number | null>(null);

  useEffect(() => {
    if (!catchUp) return;
    setShownCatchUp(catchUp.count);
    const t = setTimeout(() => setShownCatchUp(null), CATCH_UP_SHOWN_MS);
    return () => clearTimeout(t);
  }, [catchUp?.serial]);

  useEffect(() => {
    if (!siteId) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let gone = false;
    const recount = () => {
      // The path's effect below may still hold this site's recount after the site was left.
      if (gone) return;
      clearTimeout(timer);
      timer = setTimeout(() => {
        countUnread(siteId).then(
          (n) => !gone && setUnreadTotal(n),
          () => undefined, // the count stays as it was; the next event counts again
        );
      }, RECOUNT_AFTER_MS);
    };
    recount();
    setRecount(() => recount);
    const stop = subscribeInbox(siteId, (e) => {
      if (e.name === 'message.created' || e.name === 'conversation.read' || e.name === 'conversation.closed') recount();
      const said = visitorMessage(e);
      // One tab speaks for the browser: the one reading the stream (other tabs get the same event).
      if (said && readsStream(siteId)) announce({ ...said, title: 'New message from a visitor', replayed: e.replayed });
    });
    const stopResync = onResync(siteId, recount);
    return () => {
      gone = true;
      clearTimeout(timer);
      stop();
      stopResync();
      setUnreadTotal(0);
    };
  }, [siteId]);

  // After a navigation the count is asked again: a page that set the title's count itself (and
  // cleared it as it went) leaves it right.
  useEffect(() => recount?.(), [path]);

  return (
    <span class="live">
      <span class={`connection connection-${connection}`} role="status" aria-live="polite">
        {LABEL[connection]}
        {shownCatchUp !== null && connection === 'live' && (
          <span class="catch-up">
            {' · '}
            {shownCatchUp === 1 ? '1 update while offline' : `${shownCatchUp} updates while offline`}
          </span>
        )}
      </span>
      <Mentions siteId={siteId} />
      <details class="live-settings">
        <summary>Notifications</summary>
        <div class="live-settings-panel">
          <NotificationSettings />
        </div>
      </details>
    </span>
  );
}
