/**
 * The signature checker: the owner pastes a delivery's raw body, its headers (or the three values)
 * and the secrets, and sees why the signature does or does not verify (signature.ts). Everything
 * happens in this page with Web Crypto: nothing typed here is sent anywhere.
 */
import { useState } from 'preact/hooks';
import { Button } from '../components/Button';
import { Field, TextInput } from '../components/Field';
import { checkSignature, parseHeaders, type CheckResult } from './signature';
import type { CheckRequest } from './deliveries';

const fromLog = (c: CheckRequest) =>
  Object.entries(c.headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');

function area(label: string, value: string, set: (v: string) => void, hint: string, rows = 5) {
  return (
    <Field label={label} hint={hint}>
      {({ id, describedBy }) => (
        <textarea
          id={id}
          rows={rows}
          class="mono"
          spellcheck={false}
          autocomplete="off"
          value={value}
          onInput={(e) => set(e.currentTarget.value)}
          aria-describedby={describedBy}
        />
      )}
    </Field>
  );
}

export function CheckerView({ from }: { from: CheckRequest | null }) {
  const [body, setBody] = useState(from?.body ?? '');
  const [headers, setHeaders] = useState(from ? fromLog(from) : '');
  const [signature, setSignature] = useState('');
  const [timestamp, setTimestamp] = useState('');
  const [deliveryId, setDeliveryId] = useState('');
  const [secrets, setSecrets] = useState('');
  const [at, setAt] = useState(from?.at ?? '');
  const [result, setResult] = useState<CheckResult | null>(null);
  const [atError, setAtError] = useState('');

  const check = async (e: Event) => {
    e.preventDefault();
    let now = Math.floor(Date.now() / 1000);
    if (at.trim()) {
      const t = /^\d+$/.test(at.trim()) ? Number(at.trim()) * 1000 : Date.parse(at.trim());
      if (Number.isNaN(t)) return setAtError('A Unix time in seconds or an ISO time, e.g. 2026-11-26T07:00:00Z.');
      now = Math.floor(t / 1000);
    }
    setAtError('');
    // The verdict of the inputs before is gone at once: never shown beside inputs it was not about.
    setResult(null);
    const h = parseHeaders(headers);
    setResult(
      await checkSignature({
        body,
        signature: signature || h['x-service-signature'] || null,
        timestamp: timestamp || h['x-service-timestamp'] || null,
        deliveryId: deliveryId || h['x-service-delivery'] || null,
        event: h['x-service-event'] ?? null,
        secrets: secrets.split(/\r?\n/),
        now,
      }),
    );
  };

  return (
    <div class="stack">
      <form class="card stack" onSubmit={check} aria-labelledby="checker-title">
        <h2 id="checker-title">Signature checker</h2>
        <p class="hint">
          Paste what your receiver got. The check runs in this browser only: the secrets and the body are never sent to the service.
          {from && ' The body and headers of the attempt you chose in the log are filled in, and the time checked is when it was sent.'}
        </p>
        {area('Raw body', body, setBody, 'The exact bytes, before any JSON parsing.', 6)}
        {area('Headers', headers, setHeaders, 'As received, one “Name: value” a line (or the log’s JSON). Or fill in the three values below.', 5)}
        <div class="grid3">
          <TextInput label="X-Service-Signature" value={signature} onValue={setSignature} placeholder="sha256=…" spellcheck={false} />
          <TextInput label="X-Service-Timestamp" value={timestamp} onValue={setTimestamp} inputMode="numeric" spellcheck={false} />
          <TextInput label="X-Service-Delivery" value={deliveryId} onValue={setDeliveryId} spellcheck={false} />
        </div>
        {area('Secrets', secrets, setSecrets, 'One per line, oldest first: the current secret, then the new one of a planned roll.', 2)}
        <TextInput
          label="Received at"
          value={at}
          onValue={setAt}
          error={atError}
          hint="The receiver’s time when it got the delivery: Unix seconds or an ISO time. Empty: now."
          spellcheck={false}
        />
        <div>
          <Button variant="primary" submit>
            Check signature
          </Button>
        </div>
      </form>
      <p role="status" class="sr-only">
        {result ? (result.ok ? 'Valid.' : `Not valid: ${result.findings.map((f) => f.title).join('; ')}.`) : ''}
      </p>
      {result && (
        <section aria-labelledby="verdict-title" class="card stack">
          <h2 id="verdict-title">Result</h2>
          <p class={result.ok ? 'verdict verdict-ok' : 'verdict verdict-bad'}>
            {result.ok ? 'Valid: the SDK accepts this delivery with these secrets.' : 'Not valid: a receiver refuses this delivery.'}
          </p>
          <ul class="findings">
            {result.findings.map((f, i) => (
              <li key={i} class={`finding finding-${f.level}`}>
                <strong>{f.title}</strong>
                <p>{f.detail}</p>
              </li>
            ))}
          </ul>
        </section>
      )}
    </div>
  );
}
