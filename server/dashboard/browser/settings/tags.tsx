import { useEffect, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { TextInput } from '../components/Field';
import { useAction } from '../use-action';
import { forgetSiteTags } from '../inbox/site-tags';

type Tag = Schemas['Tag'];
const byName = (a: Tag, b: Tag) => a.name.toLowerCase().localeCompare(b.name.toLowerCase());

/** One tag: its name, renamed in place, or deleted after a confirmation. */
function TagRow({ siteId, tag, onSaved, onDeleted }: { siteId: string; tag: Tag; onSaved: (t: Tag) => void; onDeleted: () => void }) {
  const [name, setName] = useState<string | null>(null);
  const [askDelete, setAskDelete] = useState(false);
  const path = { params: { path: { siteId, tagId: tag.id } } };
  const rename = useAction(async () => {
    onSaved(await call(() => client.PATCH('/sites/{siteId}/tags/{tagId}', { ...path, body: { name: name ?? tag.name } })));
    setName(null);
  });
  return (
    <li class="line-row">
      {name === null ? (
        <>
          <span class="tag">{tag.name}</span>
          <Button variant="link" onClick={() => setName(tag.name)} aria-label={`Rename ${tag.name}`}>
            Rename
          </Button>
          <Button variant="link" onClick={() => setAskDelete(true)} aria-label={`Delete ${tag.name}`}>
            Delete
          </Button>
        </>
      ) : (
        <form class="line-row" onSubmit={rename.submit}>
          <TextInput label={`New name for ${tag.name}`} value={name} onValue={setName} maxLength={50} required autoFocus />
          <Button variant="primary" submit busy={rename.busy}>
            Save
          </Button>
          <Button onClick={() => setName(null)}>Cancel</Button>
          <ErrorBanner error={rename.error} />
        </form>
      )}
      {askDelete && (
        <ConfirmDialog
          title={`Delete the tag “${tag.name}”?`}
          confirm="Delete tag"
          danger
          onCancel={() => setAskDelete(false)}
          onConfirm={async () => {
            await call(() => client.DELETE('/sites/{siteId}/tags/{tagId}', path));
            onDeleted();
          }}
        >
          <p>It is taken off every conversation that carries it.</p>
        </ConfirmDialog>
      )}
    </li>
  );
}

/** The site's tags (owners keep them; every member puts them on conversations in the inbox). */
export function TagSettings({ siteId }: { siteId: string }) {
  const [tags, setTags] = useState<Tag[] | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [name, setName] = useState('');
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/tags', { params: { path: { siteId } } })).then(setTags, setLoadError);
  }, [siteId]);
  const changed = (next: Tag[]) => {
    forgetSiteTags(siteId);
    setTags(next.sort(byName));
  };
  const add = useAction(async () => {
    const tag = await call(() => client.POST('/sites/{siteId}/tags', { params: { path: { siteId } }, body: { name } }));
    changed([...(tags ?? []), tag]);
    setName('');
  });
  return (
    <section class="card stack" aria-labelledby="tags-title">
      <h2 id="tags-title">Tags</h2>
      <p class="hint">Agents put these on conversations in the inbox; rows show them. At most 200, each up to 50 characters.</p>
      <ErrorBanner error={loadError} />
      {tags === null ? (
        !loadError && <p class="loading">Loading…</p>
      ) : tags.length === 0 ? (
        <p class="muted">No tags yet.</p>
      ) : (
        <ul class="tag-settings" aria-label="The site's tags">
          {tags.map((t) => (
            <TagRow
              key={t.id}
              siteId={siteId}
              tag={t}
              onSaved={(saved) => changed(tags.map((x) => (x.id === saved.id ? saved : x)))}
              onDeleted={() => changed(tags.filter((x) => x.id !== t.id))}
            />
          ))}
        </ul>
      )}
      <form class="line-row" onSubmit={add.submit}>
        <TextInput label="New tag" value={name} onValue={setName} maxLength={50} required />
        <Button variant="primary" submit busy={add.busy}>
          Add tag
        </Button>
      </form>
      <ErrorBanner error={add.error} />
    </section>
  );
}
