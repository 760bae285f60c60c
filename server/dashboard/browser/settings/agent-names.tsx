import { useEffect, useState } from 'preact/hooks';
import { call, client } from '../api';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

/**
 * Whether visitors see who answers: each agent's display name on their replies in the chat window
 * (the default), or the site's name on every reply. Its own setting (GET/PUT agent-names).
 */
export function AgentNames({ siteId, siteName }: { siteId: string; siteName: string }) {
  const [shown, setShown] = useState<boolean | null>(null);
  const [chosen, setChosen] = useState(true);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [saved, setSaved] = useState('');
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/agent-names', { params: { path: { siteId } } })).then((s) => {
      setShown(s.shown);
      setChosen(s.shown);
    }, setLoadError);
  }, [siteId]);
  const save = useAction(async () => {
    setSaved('');
    const s = await call(() => client.PUT('/sites/{siteId}/agent-names', { params: { path: { siteId } }, body: { shown: chosen } }));
    setShown(s.shown);
    setSaved('Saved.');
  });
  return (
    <section class="card stack" aria-labelledby="agent-names-title">
      <h2 id="agent-names-title">Who visitors see answering</h2>
      <ErrorBanner error={loadError ?? save.error} />
      {shown === null ? (
        !loadError && <p class="loading">Loading…</p>
      ) : (
        <form class="stack" onSubmit={save.submit}>
          <fieldset class="checks">
            <legend>Name on replies in the chat window</legend>
            <label class="check">
              <input type="radio" name="agent-names" checked={chosen} onChange={() => setChosen(true)} />
              <span>Each agent’s name (their display name, set on the account page)</span>
            </label>
            <label class="check">
              <input type="radio" name="agent-names" checked={!chosen} onChange={() => setChosen(false)} />
              <span>The site’s name, “{siteName}”, on every reply</span>
            </label>
          </fieldset>
          <p class="hint">Replies from an integration (the public API) always show the site’s name. Older replies follow the choice too.</p>
          <SubmitRow busy={save.busy} disabled={chosen === shown} status={saved}>
            Save
          </SubmitRow>
        </form>
      )}
    </section>
  );
}
