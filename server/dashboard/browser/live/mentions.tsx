/**
 * A note that mentions the signed-in member (`note.mentioned`: the server sends it to that member
 * alone, server/notes/service.ts) shows in the header on every page, newest first, until opened or
 * dismissed; it also beeps and pops a desktop notification like a visitor's message when the member
 * turned those on (notifications.ts). Mentions are kept for the page's life: one made while no
 * dashboard was open is seen in the conversation's notes (highlighted), not here.
 */
import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../api';
import { Button } from '../components/Button';
import { Link } from '../components/Link';
import { readsStream } from './hub';
import { subscribeInbox } from './inbox-stream';
import { announce } from './notifications';

type Mention = Schemas['InboxNoteMentioned'];

export function Mentions({ siteId }: { siteId: string | undefined }) {
  const [list, setList] = useState<Mention[]>([]);
  useEffect(() => {
    setList([]);
    if (!siteId) return;
    return subscribeInbox(siteId, (e) => {
      const d = e.data as Mention | null;
      if (e.name !== 'note.mentioned' || !d?.note?.id) return;
      setList((before) => (before.some((m) => m.note.id === d.note.id) ? before : [d, ...before]));
      // One tab speaks for the browser: the one reading the stream.
      if (readsStream(siteId))
        announce({ conversationId: d.note.conversationId, title: `${d.note.authorName} mentioned you in a note`, body: d.note.content, replayed: e.replayed });
    });
  }, [siteId]);
  const [first] = list;
  const dismiss = () => setList((before) => before.slice(1));
  return (
    <span class="mention-slot" role="status">
      {first && siteId && (
        <span class="mention">
          <strong>{first.note.authorName}</strong> mentioned you in a note
          {list.length > 1 && ` (+${list.length - 1} more)`}
          {/* Opening it dismisses it (the click reaches here after the link has navigated). */}
          <span onClick={dismiss}>
            <Link to={`/sites/${siteId}/inbox?conversation=${first.note.conversationId}`}>Open</Link>
          </span>
          <Button variant="link" onClick={dismiss}>
            Dismiss
          </Button>
        </span>
      )}
    </span>
  );
}
