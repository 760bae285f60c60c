import { useEffect, useState } from 'preact/hooks';
import { call, client, type Me, type Schemas } from '../api';
import { TextInput } from '../components/Field';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

type AlertSetting = Schemas['AlertSetting'];

/**
 * The person's own emails of waiting visitors, one setting per site (GET/PUT me/alerts): sent only
 * while none of their inbox tabs of the site is open.
 */
export function MyAlerts({ me }: { me: Me }) {
  if (!me.sites.length) return null;
  return (
    <section class="card stack" aria-labelledby="my-alerts-title">
      <h2 id="my-alerts-title">Emails of waiting visitors</h2>
      <p class="hint">
        Sent while you have no inbox of the site open: when a visitor starts a conversation, and when a visitor waits unanswered. At most one email of a
        conversation every 15 minutes.
      </p>
      {me.sites.map((site) => (
        <SiteAlerts key={site.id} siteId={site.id} siteName={site.name} />
      ))}
    </section>
  );
}

function SiteAlerts({ siteId, siteName }: { siteId: string; siteName: string }) {
  const [saved, setSaved] = useState<AlertSetting | null>(null);
  const [mode, setMode] = useState<AlertSetting['mode']>('all');
  const [minutes, setMinutes] = useState('5');
  const [loadError, setLoadError] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/me/alerts', { params: { path: { siteId } } })).then((s) => {
      setSaved(s);
      setMode(s.mode);
      setMinutes(String(s.waitMinutes));
    }, setLoadError);
  }, [siteId]);
  const save = useAction(async () => {
    setStatus('');
    const body = { mode, waitMinutes: Number(minutes) };
    const s = await call(() => client.PUT('/sites/{siteId}/me/alerts', { params: { path: { siteId } }, body }));
    setSaved(s);
    setStatus('Saved.');
  });
  const id = `alerts-${siteId}`;
  if (!saved) return loadError ? <ErrorBanner error={loadError} /> : <p class="loading">Loading…</p>;
  return (
    <form class="stack" onSubmit={save.submit} aria-label={`Emails of waiting visitors on ${siteName}`}>
      <ErrorBanner error={save.error} />
      <div class="field">
        <label for={id}>{siteName}</label>
        <select id={id} value={mode} onChange={(e) => setMode(e.currentTarget.value as AlertSetting['mode'])}>
          <option value="all">Every conversation</option>
          <option value="assigned">Only conversations assigned to me</option>
          <option value="none">No emails</option>
        </select>
      </div>
      {mode !== 'none' && (
        <TextInput
          label="After a visitor has waited (minutes)"
          type="number"
          inputMode="numeric"
          min={1}
          max={240}
          value={minutes}
          onValue={setMinutes}
          hint="1 to 240."
        />
      )}
      <SubmitRow busy={save.busy} disabled={mode === saved.mode && Number(minutes) === saved.waitMinutes} status={status}>
        Save
      </SubmitRow>
    </form>
  );
}
