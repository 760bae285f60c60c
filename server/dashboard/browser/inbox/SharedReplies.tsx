/**
 * Shared replies in the inbox (docs/dashboard.md, "Shared replies"): the picker's data, filled in
 * for the open conversation; the dialog where owners keep them (agents read them there); and the
 * one-time offer to import the replies this browser kept before they were shared.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, client, type Role, type Schemas } from '../api';
import { Button } from '../components/Button';
import { Dialog } from '../components/Dialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { TextInput } from '../components/Field';
import { useAction } from '../use-action';
import { answerImport, DEFAULT_CANNED, importAnswered, localReplies, type CannedReply } from './canned';

type Reply = Schemas['SharedReply'];
export type FilledReply = Schemas['FilledSharedReply'];

/**
 * The site's replies filled in for one conversation, read once `wanted` (the first `/` typed) and
 * again when `version` moves (the editor closed); null until they arrived.
 */
export function useFilledReplies(siteId: string, conversationId: string, version: number, wanted: boolean) {
  const [replies, setReplies] = useState<FilledReply[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!wanted) return;
    let stale = false;
    setError(null);
    call(() => client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/shared-replies', { params: { path: { siteId, conversationId } } })).then(
      (r) => !stale && setReplies(r),
      (err) => !stale && setError(err),
    );
    return () => {
      stale = true;
    };
  }, [siteId, conversationId, version, wanted]);
  return { replies, error };
}

const PLACEHOLDER_HINT =
  'Placeholders: {visitor.name}, {visitor.firstName}, {agent.name}, {site.name}; {visitor.firstName|there} uses “there” when the visitor gave no name.';

/** The site's shared replies: every member reads them; owners add, change and delete them. */
export function SharedRepliesEditor({ siteId, role, onClose }: { siteId: string; role: Role; onClose: () => void }) {
  const owner = role === 'owner';
  const [replies, setReplies] = useState<Reply[] | null>(null);
  const [editing, setEditing] = useState<Reply | null>(null);
  const [title, setTitle] = useState('');
  const [body, setBody] = useState('');
  const [said, setSaid] = useState('');
  const [loadError, setLoadError] = useState<unknown>(null);
  const reload = () => call(() => client.GET('/sites/{siteId}/shared-replies', { params: { path: { siteId } } })).then(setReplies, setLoadError);
  useEffect(() => void reload(), [siteId]);

  const edit = (r: Reply | null) => {
    setEditing(r);
    setTitle(r?.title ?? '');
    setBody(r?.body ?? '');
    setSaid('');
  };
  const save = useAction(async () => {
    const path = { params: { path: { siteId } } };
    const saved = editing
      ? await call(() => client.PATCH('/sites/{siteId}/shared-replies/{replyId}', { params: { path: { siteId, replyId: editing.id } }, body: { title, body } }))
      : await call(() => client.POST('/sites/{siteId}/shared-replies', { ...path, body: { title, body } }));
    edit(null);
    setSaid(`Saved “${saved.title}”.`);
    await reload();
  });
  const remove = useAction(async () => {
    if (!editing) return;
    await call(() => client.DELETE('/sites/{siteId}/shared-replies/{replyId}', { params: { path: { siteId, replyId: editing.id } } }));
    setSaid(`Deleted “${editing.title}”.`);
    edit(null);
    await reload();
  });
  const suggest = useAction(async () => {
    await call(() => client.POST('/sites/{siteId}/shared-reply-imports', { params: { path: { siteId } }, body: { replies: DEFAULT_CANNED } }));
    await reload();
  });

  return (
    <Dialog title="Shared replies" onClose={onClose} class="canned-dialog">
      <p class="hint">
        Type / at the start of a reply to insert one, filled in for the conversation. Everyone on the site uses them;
        {owner ? ' you keep them as an owner.' : ' owners add and change them.'}
      </p>
      <ErrorBanner error={loadError} />
      {replies === null ? (
        !loadError && <p class="loading">Loading shared replies…</p>
      ) : replies.length === 0 ? (
        <div class="stack">
          <p class="muted">None yet.</p>
          {owner && (
            <div>
              <ErrorBanner error={suggest.error} />
              <Button onClick={suggest.run} busy={suggest.busy}>
                Add the suggested replies
              </Button>
            </div>
          )}
        </div>
      ) : (
        <ul class="canned-edit" aria-label="The site’s shared replies">
          {replies.map((r) => (
            <li key={r.id}>
              <span>
                <strong>{r.title}</strong> <span class="muted">{r.body}</span>
              </span>
              {owner && (
                <Button variant="link" aria-label={`Edit ${r.title}`} onClick={() => edit(r)}>
                  Edit
                </Button>
              )}
            </li>
          ))}
        </ul>
      )}
      <p class="copy-status" role="status">
        {said}
      </p>
      {owner ? (
        <form class="stack" aria-label={editing ? `Edit ${editing.title}` : 'New shared reply'} onSubmit={save.submit}>
          <ErrorBanner error={save.error ?? remove.error} />
          <TextInput label="Title" autofocus value={title} onValue={setTitle} maxLength={60} required />
          <div class="field">
            <label for="canned-new-body">Text</label>
            <textarea
              id="canned-new-body"
              rows={4}
              value={body}
              maxLength={10000}
              required
              aria-describedby="canned-new-hint"
              onInput={(e) => setBody(e.currentTarget.value)}
            />
            <p class="hint" id="canned-new-hint">
              Markdown. {PLACEHOLDER_HINT}
            </p>
          </div>
          <div class="actions">
            {editing ? (
              <>
                <Button variant="danger" onClick={remove.run} busy={remove.busy}>
                  Delete
                </Button>
                <Button onClick={() => edit(null)}>Cancel</Button>
              </>
            ) : (
              <Button onClick={onClose}>Done</Button>
            )}
            <Button variant="primary" submit busy={save.busy}>
              {editing ? 'Save' : 'Add'}
            </Button>
          </div>
        </form>
      ) : (
        <div class="actions">
          <Button onClick={onClose}>Done</Button>
        </div>
      )}
    </Dialog>
  );
}

/**
 * To an owner whose browser kept canned replies before they were shared: import them into the
 * site, once. Either answer (import, or no) ends the offer in this browser.
 */
export function ImportOffer({ siteId, accountId, role, onImported }: { siteId: string; accountId: string; role: Role; onImported: () => void }) {
  const [kept] = useState<CannedReply[] | null>(() => (role === 'owner' && !importAnswered(accountId) ? localReplies(accountId) : null));
  const [result, setResult] = useState<string | null>(null);
  const [gone, setGone] = useState(false);
  const doImport = useAction(async () => {
    const r = await call(() => client.POST('/sites/{siteId}/shared-reply-imports', { params: { path: { siteId } }, body: { replies: kept!.slice(0, 200) } }));
    answerImport(accountId, 'imported');
    const left = r.skipped.length ? ` ${r.skipped.length} left out: ${r.skipped.map((s) => `“${s.title}” (${s.reason})`).join(', ')}.` : '';
    setResult(`Imported ${r.imported.length} ${r.imported.length === 1 ? 'reply' : 'replies'}.${left}`);
    onImported();
  });
  if (!kept || gone) return null;
  if (result)
    return (
      <div class="banner banner-info" role="status">
        <p>{result}</p>
        <Button variant="link" onClick={() => setGone(true)}>
          Dismiss
        </Button>
      </div>
    );
  return (
    <div class="banner banner-info stack" role="region" aria-label="Import canned replies">
      <p>
        This browser kept {kept.length} canned {kept.length === 1 ? 'reply' : 'replies'} of yours from before replies were shared. Import them as shared replies
        of this site, for everyone on it?
      </p>
      <ErrorBanner error={doImport.error} />
      <div class="line-row">
        <Button variant="primary" onClick={doImport.run} busy={doImport.busy}>
          Import {kept.length} {kept.length === 1 ? 'reply' : 'replies'}
        </Button>
        <Button
          onClick={() => {
            answerImport(accountId, 'declined');
            setGone(true);
          }}
        >
          No, thanks
        </Button>
      </div>
    </div>
  );
}
