import { useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ErrorBanner } from '../components/ErrorBanner';
import { useSiteTags } from './site-tags';

type TagRef = Schemas['TagRef'];

/** A conversation's tags as chips, each with a button to take it off; a row shows the same chips without buttons. */
export function TagChips({ tags, onRemove }: { tags: TagRef[]; onRemove?: (t: TagRef) => void }) {
  if (!tags.length) return null;
  return (
    <ul class="tag-chips" aria-label="Tags">
      {tags.map((t) => (
        <li key={t.id} class="tag">
          {t.name}
          {onRemove && (
            <button type="button" class="tag-remove" aria-label={`Remove tag ${t.name}`} onClick={() => onRemove(t)}>
              ×
            </button>
          )}
        </li>
      ))}
    </ul>
  );
}

/**
 * The open conversation's tags: chips to take one off, and a list of the site's other tags to put
 * one on (a native select and a button: keyboard and screen readers work as everywhere). Each
 * change answers the conversation's tags, which the row and the view then show.
 */
export function TagPicker(p: { siteId: string; conversationId: string; tags: TagRef[]; onTags: (tags: TagRef[]) => void }) {
  const { tags: all, error: readError } = useSiteTags(p.siteId);
  const [chosen, setChosen] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const change = async (method: 'PUT' | 'DELETE', tagId: string) => {
    setBusy(true);
    setError(null);
    try {
      const params = { params: { path: { siteId: p.siteId, conversationId: p.conversationId, tagId } } };
      const path = '/sites/{siteId}/inbox/conversations/{conversationId}/tags/{tagId}' as const;
      p.onTags(await call(() => (method === 'PUT' ? client.PUT(path, params) : client.DELETE(path, params))));
      setChosen('');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const on = new Set(p.tags.map((t) => t.id));
  const offered = (all ?? []).filter((t) => !on.has(t.id));
  // A tag chosen and then deleted by an owner is no longer offered: the choice goes with it.
  const choice = offered.some((t) => t.id === chosen) ? chosen : '';
  return (
    <div class="tag-picker">
      <TagChips tags={p.tags} onRemove={(t) => !busy && void change('DELETE', t.id)} />
      {offered.length > 0 && (
        <form
          class="line-row"
          onSubmit={(e) => {
            e.preventDefault();
            if (choice) void change('PUT', choice);
          }}
        >
          <label for="tag-picker-select" class="sr-only">
            Tag to add
          </label>
          <select id="tag-picker-select" value={choice} onChange={(e) => setChosen(e.currentTarget.value)}>
            <option value="">Add a tag…</option>
            {offered.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
              </option>
            ))}
          </select>
          <Button submit busy={busy} disabled={!choice}>
            Add tag
          </Button>
        </form>
      )}
      <ErrorBanner error={error ?? readError} />
    </div>
  );
}
