import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { TextInput } from '../components/Field';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

/** Renames the site (the members see the new name at their next load of the dashboard). */
export function SiteName({ siteId, name, onSaved }: { siteId: string; name: string; onSaved: (name: string) => void }) {
  const [value, setValue] = useState(name);
  const [saved, setSaved] = useState('');
  const { busy, error, submit } = useAction(async () => {
    setSaved('');
    const s = await call(() => client.PATCH('/sites/{siteId}', { params: { path: { siteId } }, body: { name: value.trim() } }));
    onSaved(s.name);
    setValue(s.name);
    setSaved('Saved.');
  });
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="site-name-title">
      <h2 id="site-name-title">Site name</h2>
      <ErrorBanner error={error} />
      <TextInput label="Name" value={value} onValue={setValue} required maxLength={200} hint="How the site is named in the dashboard and to its members." />
      <SubmitRow busy={busy} disabled={value.trim() === name || !value.trim()} status={saved}>
        Save name
      </SubmitRow>
    </form>
  );
}
