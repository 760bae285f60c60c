/**
 * The event address: its URL and events (validation problems shown by field), enabled or disabled
 * (by an owner, or by the service after persistent failure, and why), a signed test delivery with
 * its result, and the signing secret: a planned roll with its overlap explained, switching it now,
 * cancelling it, or rotating at once. A new secret is shown once (ShownOnce) and dropped when dismissed.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { TextInput } from '../components/Field';
import { RelativeTime } from '../components/RelativeTime';
import { ShownOnce } from '../components/ShownOnce';
import { duration, EVENT_NAMES, Excerpt, keepDetails, Outcome } from './shared';

type Address = Schemas['EventAddress'];
type Shown = { value: string; switchAt?: string };

const when = (iso: string) => new Date(iso).toLocaleString();

export function AddressView({ siteId }: { siteId: string }) {
  const [address, setAddress] = useState<Address | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [shown, setShown] = useState<Shown | null>(null);
  const path = { params: { path: { siteId } } };

  const load = async () => {
    try {
      // data: null when none is set yet (200, so an owner opening the page logs no failed request).
      setAddress(await call(() => client.GET('/sites/{siteId}/event-address', path)));
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => void load(), [siteId]);

  return (
    <div class="stack">
      <ErrorBanner error={error} />
      {shown && (
        <div class="stack">
          <ShownOnce label="Signing secret" value={shown.value} onDone={() => setShown(null)} />
          {shown.switchAt && <Overlap switchAt={shown.switchAt} />}
        </div>
      )}
      {address === undefined ? (
        !error && <p class="loading">Loading the event address…</p>
      ) : (
        <>
          {address ? <StateCard siteId={siteId} address={address} onChange={setAddress} /> : <EmptyState title="No event address yet." />}
          <AddressForm
            siteId={siteId}
            address={address}
            onSaved={(a, secret) => {
              setAddress(a);
              if (secret) setShown({ value: secret });
            }}
          />
          {address && <TestDelivery siteId={siteId} />}
          {address && <Secret siteId={siteId} address={address} onSecret={setShown} reload={load} />}
        </>
      )}
    </div>
  );
}

/** The overlap of a planned roll in plain words: what the receiver must accept, until when. */
function Overlap({ switchAt }: { switchAt: string }) {
  return (
    <div class="banner banner-info overlap" role="note">
      <p>
        <strong>Until {when(switchAt)}</strong> the service keeps signing with the current secret; <strong>from then on</strong> with this new one.
      </p>
      <p>
        Add the new secret to your receiver now, <em>beside</em> the current one, so it accepts both until the switch: the SDK’s verifier takes several,{' '}
        <code>
          verifyWebhook({'{'} secrets: [current, next], … {'}'})
        </code>
        . After the switch the old secret signs nothing: remove it.
      </p>
    </div>
  );
}

function StateCard({ siteId, address, onChange }: { siteId: string; address: Address; onChange: (a: Address) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const setEnabled = async (enabled: boolean) => {
    onChange(await call(() => client.PATCH('/sites/{siteId}/event-address', { params: { path: { siteId } }, body: { enabled } })));
    setConfirming(false);
  };
  const enable = async () => {
    setBusy(true);
    setError(null);
    try {
      await setEnabled(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const enabled = address.state === 'enabled';
  return (
    <section class="card stack" aria-labelledby="address-state">
      <h2 id="address-state">
        Event address <span class={`tag ${enabled ? 'outcome-delivered' : 'outcome-failed'}`}>{enabled ? 'Enabled' : 'Disabled'}</span>
      </h2>
      <p class="break">
        <code>{address.url}</code>
      </p>
      <p>Events: {address.events.join(', ')}</p>
      {!enabled && address.disabledReason === 'failing' && (
        <div class="banner banner-error" role="note">
          <p>
            <strong>Disabled automatically {address.disabledAt && <RelativeTime at={address.disabledAt} />}.</strong> Its deliveries failed for 5 days without a
            single success, with at least 10 failed deliveries. Check the receiver with a test delivery, enable the address, then recover what failed meanwhile
            from the delivery log.
          </p>
        </div>
      )}
      {!enabled && address.disabledReason === 'owner' && (
        <p>
          Disabled by an owner <RelativeTime at={address.disabledAt} />. Deliveries made while disabled end failed without an attempt; recover them after
          enabling.
        </p>
      )}
      {enabled && address.failingSince && (
        <div class="banner banner-warning" role="note">
          <p>
            Failing since <RelativeTime at={address.failingSince} />: {address.failedDeliveries} failed{' '}
            {address.failedDeliveries === 1 ? 'delivery' : 'deliveries'} since the last success. After 5 days of failure with at least 10 failed deliveries the
            service disables the address.
          </p>
        </div>
      )}
      <ErrorBanner error={error} />
      <div>
        {enabled ? (
          <Button variant="danger" onClick={() => setConfirming(true)}>
            Disable
          </Button>
        ) : (
          <Button variant="primary" busy={busy} onClick={enable}>
            Enable
          </Button>
        )}
      </div>
      {confirming && (
        <ConfirmDialog title="Disable the event address?" confirm="Disable" danger onCancel={() => setConfirming(false)} onConfirm={() => setEnabled(false)}>
          <p>Nothing is sent while it is disabled: new deliveries end failed without an attempt. After enabling, recover them from the delivery log.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function AddressForm({ siteId, address, onSaved }: { siteId: string; address: Address | null; onSaved: (a: Address, secret: string | null) => void }) {
  const [url, setUrl] = useState(address?.url ?? '');
  const [events, setEvents] = useState<Schemas['EventName'][]>(address?.events ?? [...EVENT_NAMES]);
  const [fields, setFields] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSaved('');
    const local: Record<string, string> = {};
    if (!/^https:\/\/./i.test(url.trim())) local.url = 'An event address must start with https://.';
    if (!events.length) local.events = 'Choose at least one event.';
    setFields(local);
    if (Object.keys(local).length) return;
    const w = keepDetails(() => client.PUT('/sites/{siteId}/event-address', { params: { path: { siteId } }, body: { url: url.trim(), events } }));
    setBusy(true);
    try {
      const done = await call(w.request);
      onSaved(done.address, done.secret);
      setSaved('Saved.');
    } catch (err) {
      const byField = w.byField();
      // The service's own URL checks (https, resolvable, public) answer 400 without a path: they are about the URL.
      if (err instanceof ApiFailure && err.code === 'invalid_request' && !Object.keys(byField).length) byField.url = err.message;
      if (Object.keys(byField).length) setFields(byField);
      else setError(err);
    } finally {
      setBusy(false);
    }
  };
  const toggle = (name: Schemas['EventName'], on: boolean) =>
    setEvents((s) => (on ? EVENT_NAMES.filter((n) => n === name || s.includes(n)) : s.filter((n) => n !== name)));
  const other = Object.entries(fields).filter(([k]) => k !== 'url' && k !== 'events');
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="address-form" noValidate>
      <h2 id="address-form">{address ? 'Change the address' : 'Set the event address'}</h2>
      <ErrorBanner error={error} />
      <TextInput
        label="URL"
        type="url"
        value={url}
        onValue={setUrl}
        error={fields.url}
        required
        maxLength={2048}
        placeholder="https://hooks.example.com/chat"
        hint="HTTPS only. Each event is POSTed here, signed."
      />
      <fieldset class={`checks${fields.events ? ' field-invalid' : ''}`} aria-describedby={fields.events ? 'events-error' : undefined}>
        <legend>Events</legend>
        {EVENT_NAMES.map((name) => (
          <label key={name} class="check">
            <input type="checkbox" checked={events.includes(name)} onChange={(e) => toggle(name, e.currentTarget.checked)} />
            <code>{name}</code>
          </label>
        ))}
        {fields.events && (
          <p class="field-error" id="events-error">
            {fields.events}
          </p>
        )}
      </fieldset>
      {other.map(([k, m]) => (
        <p class="field-error" key={k}>
          {m}
        </p>
      ))}
      <div class="row">
        <Button variant="primary" submit busy={busy}>
          {address ? 'Save' : 'Set address'}
        </Button>
        <span role="status" class="muted">
          {saved}
        </span>
      </div>
    </form>
  );
}

function TestDelivery({ siteId }: { siteId: string }) {
  const [event, setEvent] = useState<Schemas['EventName']>('message.created');
  const [result, setResult] = useState<Schemas['TestDeliveryResponse']['data'] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await call(() => client.POST('/sites/{siteId}/event-address/test', { params: { path: { siteId } }, body: { event } })));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card stack" onSubmit={send} aria-labelledby="test-title">
      <h2 id="test-title">Test delivery</h2>
      <p class="hint">An example event, signed with the secret that signs now and sent once, now (also to a disabled address). It is not retried.</p>
      <div class="row">
        <label for="test-event">Event</label>
        <select id="test-event" class="auto" value={event} onChange={(e) => setEvent(e.currentTarget.value as Schemas['EventName'])}>
          {EVENT_NAMES.map((n) => (
            <option key={n}>{n}</option>
          ))}
        </select>
        <Button submit busy={busy}>
          Send test delivery
        </Button>
      </div>
      <ErrorBanner error={error} />
      <div role="status">
        {result && (
          <dl class="facts">
            <dt>Result</dt>
            <dd>
              <Outcome outcome={result.outcome} />
            </dd>
            <dt>Status</dt>
            <dd>{result.status ?? 'no answer'}</dd>
            <dt>Duration</dt>
            <dd>{duration(result.durationMs)}</dd>
            {result.error && (
              <>
                <dt>Error</dt>
                <dd>{result.error}</dd>
              </>
            )}
            <dt>Answer</dt>
            <dd>{result.response ? <Excerpt text={result.response} /> : <span class="muted">empty</span>}</dd>
          </dl>
        )}
      </div>
    </form>
  );
}

type Confirm = 'rotate' | 'switch' | 'cancel' | null;

function Secret({ siteId, address, onSecret, reload }: { siteId: string; address: Address; onSecret: (s: Shown) => void; reload: () => Promise<void> }) {
  const [hours, setHours] = useState('24');
  const [fields, setFields] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [confirm, setConfirm] = useState<Confirm>(null);
  const path = { params: { path: { siteId } } };
  const roll = address.secretRoll;

  const startRoll = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const n = Number(hours);
    if (!Number.isInteger(n) || n < 1 || n > 168) return setFields({ switchInHours: 'Whole hours, 1 to 168.' });
    setFields({});
    const w = keepDetails(() => client.POST('/sites/{siteId}/event-address/secret/roll', { ...path, body: { switchInHours: n } }));
    setBusy(true);
    try {
      const rolled = await call(w.request);
      onSecret({ value: rolled.secret, switchAt: rolled.switchAt });
      await reload();
    } catch (err) {
      const byField = w.byField();
      if (byField.switchInHours) setFields(byField);
      else setError(err); // a roll already pending, among others: the envelope's message says so
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card stack" aria-labelledby="secret-title">
      <h2 id="secret-title">Signing secret</h2>
      <p>
        Every delivery carries <code>X-Service-Signature</code>, made with the address’s secret (shown once when it is made). Your receiver checks it with the
        same secret.
      </p>
      {roll && (
        <div class="banner banner-info" role="note">
          <p>
            <strong>A planned roll is pending.</strong> The new secret starts signing <RelativeTime at={roll.switchAt} /> ({when(roll.switchAt)}). Until then
            your receiver must accept both secrets.
          </p>
          <div class="row">
            <Button onClick={() => setConfirm('switch')}>Switch now</Button>
            <Button onClick={() => setConfirm('cancel')}>Cancel roll</Button>
          </div>
        </div>
      )}
      <ErrorBanner error={error} />
      <form class="stack" onSubmit={startRoll} aria-labelledby="roll-title" noValidate>
        <h3 id="roll-title">Planned roll: a new secret without losing deliveries</h3>
        <ol class="explain">
          <li>You get the new secret now, shown once.</li>
          <li>Until the switch time the service keeps signing with the current secret; from the switch on, with the new one.</li>
          <li>
            Meanwhile your receiver accepts <strong>both</strong>: add the new secret beside the current one (the SDK’s{' '}
            <code>
              verifyWebhook({'{'} secrets: [current, next] {'}'})
            </code>{' '}
            takes several).
          </li>
          <li>After the switch, remove the old secret: nothing is signed with it any more.</li>
        </ol>
        <TextInput
          label="Switch in (hours)"
          type="number"
          inputMode="numeric"
          min={1}
          max={168}
          value={hours}
          onValue={setHours}
          error={fields.switchInHours}
          hint="1 to 168; 24 leaves a day to update the receiver."
        />
        <div>
          <Button submit busy={busy}>
            Start planned roll
          </Button>
        </div>
      </form>
      <div class="stack">
        <h3>Rotate now: for a secret that leaked</h3>
        <p>The current secret stops at once, and a pending roll is dropped: your receiver refuses deliveries until it has the new secret.</p>
        <div>
          <Button variant="danger" onClick={() => setConfirm('rotate')}>
            Rotate secret now
          </Button>
        </div>
      </div>
      {confirm === 'rotate' && (
        <ConfirmDialog
          title="Rotate the signing secret now?"
          confirm="Rotate now"
          danger
          onCancel={() => setConfirm(null)}
          onConfirm={async () => {
            const rotated = await call(() => client.POST('/sites/{siteId}/event-address/secret/rotate', path));
            setConfirm(null);
            onSecret({ value: rotated.secret });
            await reload();
          }}
        >
          <p>The old secret stops signing at once. Deliveries fail at your receiver until it checks with the new one. For a planned change, use the roll.</p>
        </ConfirmDialog>
      )}
      {confirm === 'cancel' && (
        <ConfirmDialog
          title="Cancel the planned roll?"
          confirm="Cancel roll"
          danger
          onCancel={() => setConfirm(null)}
          onConfirm={async () => {
            await call(() => client.DELETE('/sites/{siteId}/event-address/secret/roll', path));
            setConfirm(null);
            await reload();
          }}
        >
          <p>The new secret is dropped unused and the current one keeps signing. Remove the new one from your receiver when convenient.</p>
        </ConfirmDialog>
      )}
      {confirm === 'switch' && (
        <ConfirmDialog
          title="Switch to the new secret now?"
          confirm="Switch now"
          onCancel={() => setConfirm(null)}
          onConfirm={async () => {
            await call(() => client.POST('/sites/{siteId}/event-address/secret/switch', path));
            setConfirm(null);
            await reload();
          }}
        >
          <p>Every attempt signed from about 10 seconds from now carries the new secret. Your receiver must accept it already.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
