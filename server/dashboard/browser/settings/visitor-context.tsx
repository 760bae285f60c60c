import { useEffect, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

type Settings = Schemas['VisitorContextSettings'];

/**
 * What the chat window reports of where visitors are (docs/window.md, "What the window
 * collects"): page tracking on or off, and whether page addresses keep their query strings.
 */
export function VisitorContextSettings({ siteId }: { siteId: string }) {
  const [saved, setSaved] = useState<Settings | null>(null);
  const [chosen, setChosen] = useState<Settings | null>(null);
  const [status, setStatus] = useState('');
  const [loadError, setLoadError] = useState<unknown>(null);
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/visitor-context', { params: { path: { siteId } } })).then((s) => {
      setSaved(s);
      setChosen(s);
    }, setLoadError);
  }, [siteId]);
  const save = useAction(async () => {
    setStatus('');
    const s = await call(() => client.PATCH('/sites/{siteId}/visitor-context', { params: { path: { siteId } }, body: chosen! }));
    setSaved(s);
    setChosen(s);
    setStatus('Saved.');
  });

  return (
    <section class="card stack" aria-labelledby="visitor-context-title">
      <h2 id="visitor-context-title">Visitor context</h2>
      <p>
        While a conversation is open, the chat window tells your agents which page the visitor is on, the pages of the visit, their language, time zone and
        browser; never their IP address or location. Kept 90 days (the service's default) and deleted with the visitor’s data.
      </p>
      <ErrorBanner error={loadError} />
      {chosen && saved && (
        <form class="stack" onSubmit={save.submit}>
          <ErrorBanner error={save.error} />
          <label class="check">
            <input type="checkbox" checked={chosen.pageTracking} onChange={(e) => setChosen({ ...chosen, pageTracking: e.currentTarget.checked })} />
            <span>
              <strong>Report where visitors are.</strong> Off: the window reports nothing of it, and nothing is kept.
            </span>
          </label>
          <label class="check">
            <input
              type="checkbox"
              checked={chosen.keepQuery}
              disabled={!chosen.pageTracking}
              onChange={(e) => setChosen({ ...chosen, keepQuery: e.currentTarget.checked })}
            />
            <span>
              <strong>Keep query strings</strong> (<code>?q=shoes</code>). Off, the default: addresses are cut before the <code>?</code> in the visitor’s
              browser, since queries often carry search words, emails or tokens.
            </span>
          </label>
          <SubmitRow busy={save.busy} disabled={chosen.pageTracking === saved.pageTracking && chosen.keepQuery === saved.keepQuery} status={status}>
            Save
          </SubmitRow>
        </form>
      )}
    </section>
  );
}
