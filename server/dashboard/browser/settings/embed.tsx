import { useEffect, useRef, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { CopyButton } from '../components/CopyButton';
import { TextInput } from '../components/Field';
import { ErrorBanner } from '../components/ErrorBanner';
import { useAction } from '../use-action';

type Check = Schemas['EmbedCheckResponse']['data'];

/** The snippet to paste into the site's pages, with a copy button, and the check of a page. */
export function EmbedSnippet({ siteId, origins }: { siteId: string; origins: string[] }) {
  const [snippet, setSnippet] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const area = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/embed', { params: { path: { siteId } } })).then((e) => setSnippet(e.snippet), setError);
  }, [siteId]);

  return (
    <section class="card stack" aria-labelledby="embed-title">
      <h2 id="embed-title">Embed snippet</h2>
      <p>
        Paste this tag into every page that should show the chat window, before <code>&lt;/body&gt;</code>. It works on the allowed origins only.
      </p>
      <ErrorBanner error={error} />
      {snippet !== null && (
        <div class="stack">
          <label for="embed-snippet" class="sr-only">
            Embed snippet
          </label>
          <textarea
            id="embed-snippet"
            ref={area}
            class="snippet"
            readOnly
            rows={3}
            spellcheck={false}
            value={snippet}
            onFocus={(e) => e.currentTarget.select()}
          />
          <div>
            <CopyButton value={snippet} label="Copy snippet" fallbackTarget={() => area.current} />
          </div>
        </div>
      )}
      <EmbedCheck siteId={siteId} origins={origins} />
    </section>
  );
}

function EmbedCheck({ siteId, origins }: { siteId: string; origins: string[] }) {
  const [url, setUrl] = useState(origins[0] ? `${origins[0]}/` : '');
  const [result, setResult] = useState<Check | null>(null);
  const { busy, error, submit } = useAction(async () => {
    setResult(null);
    setResult(await call(() => client.POST('/sites/{siteId}/embed/check', { params: { path: { siteId } }, body: { url: url.trim() } })));
  });
  return (
    <form class="stack embed-check" onSubmit={submit} aria-labelledby="embed-check-title">
      <h3 id="embed-check-title">Check a page of your site</h3>
      <p class="hint">
        The service fetches the page and says whether the snippet is on it and whether anything there (a redirect, the page's Content-Security-Policy, an old
        snippet) would stop the window. It sees the HTML as served: a tag a tag manager adds later cannot be seen. Up to 10 checks a minute.
      </p>
      <ErrorBanner error={error} />
      <TextInput
        label="Page address"
        type="url"
        value={url}
        onValue={setUrl}
        required
        maxLength={2048}
        placeholder="https://shop.example/products/tea"
        hint="A page on one of the allowed origins."
      />
      <div>
        <Button variant="primary" submit busy={busy}>
          Check page
        </Button>
      </div>
      <div aria-live="polite">{result && <CheckResult r={result} />}</div>
    </form>
  );
}

/** The outcome first (one sentence), then each problem with its code, then the details. */
function CheckResult({ r }: { r: Check }) {
  const verdict = r.ok
    ? { cls: 'check-ok', text: 'The snippet is on this page and nothing the check can see stops the window.' }
    : !r.reachable
      ? { cls: 'check-bad', text: 'The page could not be read.' }
      : r.found
        ? { cls: 'check-warn', text: 'The snippet is on this page, but something may stop the window.' }
        : { cls: 'check-bad', text: 'The snippet is not on this page.' };
  return (
    <section class={`check-result ${verdict.cls}`} aria-labelledby="check-result-title">
      <h4 id="check-result-title">{verdict.text}</h4>
      {r.problems.length > 0 && (
        <ul class="problems" aria-label="Problems found">
          {r.problems.map((p, i) => (
            <li key={i}>
              <code>{p.code}</code> {p.message}
            </li>
          ))}
        </ul>
      )}
      <dl class="facts">
        <dt>Checked</dt>
        <dd>
          <code>{r.url}</code>
        </dd>
        {r.finalUrl !== r.url && (
          <>
            <dt>Ended at</dt>
            <dd>
              <code>{r.finalUrl}</code>
            </dd>
          </>
        )}
        {r.redirects.length > 0 && (
          <>
            <dt>Redirects</dt>
            <dd>
              <ol>
                {r.redirects.map((x, i) => (
                  <li key={i}>
                    {x.status} <code>{x.url}</code> → <code>{x.location}</code>
                  </li>
                ))}
              </ol>
            </dd>
          </>
        )}
        <dt>HTTP status</dt>
        <dd>{r.status ?? 'no answer'}</dd>
        <dt>Loader tag</dt>
        <dd>
          {r.loader ? (
            <>
              <code>{r.loader.src}</code>, <code>data-site</code> {r.loader.siteId ? <code>{r.loader.siteId}</code> : 'missing'}
            </>
          ) : (
            'none'
          )}
        </dd>
        <dt>Read</dt>
        <dd>
          {r.bytesRead} bytes{r.truncated ? ' (stopped at 2 MB)' : ''} in {r.durationMs} ms
        </dd>
      </dl>
    </section>
  );
}
