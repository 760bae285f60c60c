import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { TextInput } from '../components/Field';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';
import { parseOrigin } from './parse-origin';

/** The origins whose pages may open the chat window: list, add (validated), remove (confirmed). */
export function AllowedOrigins({ siteId, origins, onChange }: { siteId: string; origins: string[]; onChange: (o: string[]) => void }) {
  const [value, setValue] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [removing, setRemoving] = useState<string | null>(null);
  const add = useAction(async () => {
    const parsed = parseOrigin(value);
    if ('problem' in parsed) return setProblem(parsed.problem);
    setProblem(null);
    onChange(await call(() => client.POST('/sites/{siteId}/allowed-origins', { params: { path: { siteId } }, body: { origin: parsed.origin } })));
    setValue('');
  });

  return (
    <section class="card stack" aria-labelledby="origins-title">
      <h2 id="origins-title">Allowed origins</h2>
      <p>
        The chat window opens only on pages of these origins: a page elsewhere that carries the snippet gets no window. Each is the scheme, host and port as the
        browser sends them, e.g. <code>https://shop.example</code> and <code>https://www.shop.example</code> (each listed). An empty list turns the window off.
      </p>
      {origins.length ? (
        <ul class="origins" aria-label="Allowed origins">
          {origins.map((o) => (
            <li key={o}>
              <code>{o}</code>
              <Button variant="danger" onClick={() => setRemoving(o)} aria-label={`Remove ${o}`}>
                Remove
              </Button>
            </li>
          ))}
        </ul>
      ) : (
        <EmptyState title="No allowed origins: the chat window is off.">Add the origin of your site's pages below.</EmptyState>
      )}
      <form class="stack" onSubmit={add.submit} aria-label="Add an allowed origin" noValidate>
        <ErrorBanner error={add.error} />
        <TextInput
          label="Origin to allow"
          type="url"
          value={value}
          onValue={(v) => {
            setValue(v);
            setProblem(null);
          }}
          required
          maxLength={300}
          placeholder="https://shop.example"
          error={problem}
          hint="https://host[:port], no path, no wildcard; http:// only for localhost."
        />
        <div>
          <Button variant="primary" submit busy={add.busy} disabled={!value.trim()}>
            Add origin
          </Button>
        </div>
      </form>
      {removing && (
        <ConfirmDialog
          title={`Remove ${removing}?`}
          confirm="Remove origin"
          danger
          onCancel={() => setRemoving(null)}
          onConfirm={async () => {
            onChange(await call(() => client.DELETE('/sites/{siteId}/allowed-origins', { params: { path: { siteId }, query: { origin: removing } } })));
            setRemoving(null);
          }}
        >
          <p>
            The chat window stops opening on pages of <code>{removing}</code>; windows open there now are refused at their next request.
            {origins.length === 1 && ' It is the last one: the window will be off everywhere.'}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
