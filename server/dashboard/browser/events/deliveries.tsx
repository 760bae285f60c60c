/**
 * The delivery log: one entry per event sent to the address, newest first, filtered by event,
 * outcome and creation time, paged by cursor. Each opens to its request body and every attempt
 * (headers as sent, status, answer, error, duration), can be redelivered in place (the result is
 * followed until it settles), and an attempt can be handed to the signature checker. Below, the
 * recovery of everything that failed since a time: the count first, then a confirmation.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, callPage, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { duration, EVENT_NAMES, Excerpt, isoOf, keepDetails, Outcome } from './shared';
import { usePagedList } from '../use-paged-list';
import { LoadMore } from '../components/LoadMore';

type Delivery = Schemas['Delivery'];
type Detail = Schemas['DeliveryDetail'];
type Attempt = Schemas['Attempt'];
export interface CheckRequest {
  body: string;
  headers: Record<string, string>;
  at: string;
}

interface Filters {
  event: string;
  outcome: string;
  since: string;
  until: string;
}
const NO_FILTERS: Filters = { event: '', outcome: '', since: '', until: '' };

/** A read refused for its filters: the form shows why beside each field, not in a banner. */
class FieldProblems extends Error {}

export function DeliveriesView({ siteId, onCheck }: { siteId: string; onCheck: (c: CheckRequest) => void }) {
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  // The filters asked for (each ask a new read, the same filters too) and the last ones the server took.
  const [asked, setAsked] = useState({ filters: NO_FILTERS, n: 0 });
  const [applied, setApplied] = useState<Filters>(NO_FILTERS);
  const [fields, setFields] = useState<Record<string, string>>({});

  const list = usePagedList(
    async (cursor: string | null) => {
      // A next page continues the filters its cursor was made for (a refused ask left those in place).
      const f = cursor === null ? asked.filters : applied;
      const query = {
        limit: 25,
        ...(f.event ? { event: f.event as Schemas['EventName'] } : {}),
        ...(f.outcome ? { outcome: f.outcome as Schemas['DeliveryOutcome'] } : {}),
        ...(isoOf(f.since) ? { since: isoOf(f.since) } : {}),
        ...(isoOf(f.until) ? { until: isoOf(f.until) } : {}),
        ...(cursor ? { cursor } : {}),
      };
      const w = keepDetails(() => client.GET('/sites/{siteId}/deliveries', { params: { path: { siteId }, query } }));
      try {
        const page = await callPage(w.request);
        setApplied(f);
        setFields({});
        return page;
      } catch (err) {
        const byField = w.byField();
        if (!Object.keys(byField).length) throw err;
        setFields(byField);
        throw new FieldProblems();
      }
    },
    [siteId, asked],
  );
  const { items, loading: busy } = list;
  const error = list.error instanceof FieldProblems ? null : list.error;
  const ask = (f: Filters) => setAsked((a) => ({ filters: f, n: a.n + 1 }));

  const set = (k: keyof Filters) => (e: Event) => setFilters({ ...filters, [k]: (e.currentTarget as HTMLInputElement).value });
  const submit = (e: Event) => {
    e.preventDefault();
    if (filters.since && filters.until && isoOf(filters.since)! >= isoOf(filters.until)!) return setFields({ until: 'Must be after “From”.' });
    ask(filters);
  };
  const filtered = applied !== NO_FILTERS;

  return (
    <div class="stack">
      <form class="card filters" onSubmit={submit} aria-label="Filter deliveries">
        <div class="field">
          <label for="f-event">Event</label>
          <select id="f-event" value={filters.event} onChange={set('event')}>
            <option value="">Any event</option>
            {EVENT_NAMES.map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="f-outcome">Outcome</label>
          <select id="f-outcome" value={filters.outcome} onChange={set('outcome')}>
            <option value="">Any outcome</option>
            <option value="delivered">Delivered</option>
            <option value="failed">Failed</option>
            <option value="pending">Pending</option>
          </select>
        </div>
        <TimeField id="f-since" label="From" value={filters.since} onInput={set('since')} error={fields.since} />
        <TimeField id="f-until" label="Until" value={filters.until} onInput={set('until')} error={fields.until} />
        <div class="filters-actions">
          <Button variant="primary" submit busy={busy}>
            Show
          </Button>
          <Button onClick={() => ask(applied)}>Refresh</Button>
        </div>
      </form>
      <ErrorBanner error={error} />
      {items === null ? (
        !error && <p class="loading">Loading deliveries…</p>
      ) : items.length === 0 ? (
        <EmptyState title={filtered ? 'No delivery matches these filters.' : 'No deliveries yet.'}>
          Deliveries are kept 30 days. A test delivery from the address tab shows here too.
        </EmptyState>
      ) : (
        <ul class="deliveries" aria-label="Deliveries, newest first">
          {items.map((d) => (
            <DeliveryItem key={d.eventId} siteId={siteId} delivery={d} onCheck={onCheck} />
          ))}
        </ul>
      )}
      <LoadMore list={list} label="Show older deliveries" />
      <Recovery siteId={siteId} />
    </div>
  );
}

function TimeField({ id, label, value, onInput, error }: { id: string; label: string; value: string; onInput: (e: Event) => void; error?: string }) {
  return (
    <div class={`field${error ? ' field-invalid' : ''}`}>
      <label for={id}>{label}</label>
      <input
        id={id}
        type="datetime-local"
        step={1}
        value={value}
        onInput={onInput}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={error ? `${id}-error` : undefined}
      />
      {error && (
        <p class="field-error" id={`${id}-error`}>
          {error}
        </p>
      )}
    </div>
  );
}

function DeliveryItem({ siteId, delivery: initial, onCheck }: { siteId: string; delivery: Delivery; onCheck: (c: CheckRequest) => void }) {
  const [delivery, setDelivery] = useState(initial);
  const [detail, setDetail] = useState<Detail | null>(null);
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const alive = useRef(true);
  useEffect(() => () => void (alive.current = false), []);
  const params = { params: { path: { siteId, eventId: delivery.eventId } } };
  const detailId = `d-${delivery.eventId.replace(/[^a-z0-9]/gi, '-')}`;

  const fetchDetail = async () => {
    const d = await call(() => client.GET('/sites/{siteId}/deliveries/{eventId}', params));
    if (alive.current) {
      setDetail(d);
      setDelivery(d.delivery);
    }
    return d;
  };
  const toggle = async () => {
    if (open) return setOpen(false);
    setOpen(true);
    setError(null);
    try {
      await fetchDetail();
    } catch (err) {
      setError(err);
    }
  };
  /** Sends it again, then follows it until its new attempts settle (about a minute at most). */
  const redeliver = async () => {
    setBusy(true);
    setError(null);
    setSaid('');
    try {
      const queued = await call(() => client.POST('/sites/{siteId}/deliveries/{eventId}/redeliver', params));
      if (!queued.eventIds.length) {
        setSaid('It is being sent right now: not queued twice.');
        return;
      }
      setSaid('Queued again: sending…');
      setDelivery((d) => ({ ...d, outcome: 'pending', unsentReason: null }));
      const before = delivery.attempts;
      for (let i = 0; i < 40 && alive.current; i++) {
        await new Promise((r) => setTimeout(r, 1500));
        const d = await fetchDetail();
        // A round that ended unsent (the address is disabled) adds no attempt: its reason says it ended.
        if (d.delivery.outcome !== 'pending' && (d.delivery.attempts > before || d.delivery.unsentReason !== null)) {
          setSaid(
            d.delivery.outcome === 'delivered'
              ? 'Redelivered: delivered.'
              : d.delivery.unsentReason !== null
                ? `Not sent: ${d.delivery.unsentReason}.`
                : 'Redelivered: it failed again. Open the attempts to see why.',
          );
          return;
        }
      }
      setSaid('Queued again; still pending. Refresh later.');
    } catch (err) {
      setError(err);
    } finally {
      if (alive.current) setBusy(false);
    }
  };

  return (
    <li class="delivery card">
      <div class="delivery-head">
        <span class="delivery-name">
          <code>{delivery.event}</code> {delivery.test && <span class="tag">test</span>}
        </span>
        <Outcome outcome={delivery.outcome} />
        <span class="muted">
          {delivery.attempts} {delivery.attempts === 1 ? 'attempt' : 'attempts'} · <RelativeTime at={delivery.createdAt} />
          {delivery.unsentReason !== null && <> · not sent: {delivery.unsentReason}</>}
          {delivery.nextAttemptAt && (
            <>
              {' '}
              · next <RelativeTime at={delivery.nextAttemptAt} />
            </>
          )}
        </span>
        <span class="delivery-actions">
          <Button aria-expanded={open ? 'true' : 'false'} aria-controls={detailId} onClick={toggle}>
            {open ? 'Hide attempts' : 'Show attempts'}
          </Button>
          {!delivery.test && (
            <Button busy={busy} onClick={redeliver} aria-label={`Redeliver ${delivery.eventId}`}>
              Redeliver
            </Button>
          )}
        </span>
      </div>
      <p class="muted small break">
        <code>{delivery.eventId}</code>
      </p>
      <p role="status" class="small">
        {said}
      </p>
      <ErrorBanner error={error} />
      {open && (
        <div id={detailId} class="stack">
          {!detail ? (
            !error && <p class="loading">Loading attempts…</p>
          ) : (
            <>
              <details>
                <summary>Request body ({detail.requestBody.length} bytes, the same on every attempt)</summary>
                <Excerpt text={detail.requestBody} />
              </details>
              {detail.attempts.length === 0 && (
                <p class="muted">{detail.delivery.unsentReason ? `Not sent: ${detail.delivery.unsentReason}.` : 'No attempt yet.'}</p>
              )}
              <ol class="attempts">
                {detail.attempts.map((a) => (
                  <AttemptItem
                    key={a.attempt}
                    attempt={a}
                    onCheck={a.requestHeaders ? () => onCheck({ body: detail.requestBody, headers: a.requestHeaders!, at: a.startedAt }) : undefined}
                  />
                ))}
              </ol>
            </>
          )}
        </div>
      )}
    </li>
  );
}

function AttemptItem({ attempt: a, onCheck }: { attempt: Attempt; onCheck?: () => void }) {
  const ok = a.status !== null && a.status >= 200 && a.status < 300;
  return (
    <li class="attempt">
      <p class="attempt-head">
        <strong>Attempt {a.attempt}</strong> <Outcome outcome={ok ? 'delivered' : 'failed'} /> <RelativeTime at={a.startedAt} />
      </p>
      <dl class="facts">
        <dt>Status</dt>
        <dd>{a.status ?? 'no answer'}</dd>
        <dt>Duration</dt>
        <dd>{duration(a.durationMs)}</dd>
        {a.error && (
          <>
            <dt>Error</dt>
            <dd>{a.error}</dd>
          </>
        )}
        <dt>Answer</dt>
        <dd>{a.response ? <Excerpt text={a.response} /> : <span class="muted">empty</span>}</dd>
        <dt>Request headers</dt>
        <dd>
          {a.requestHeaders ? (
            <Excerpt
              text={Object.entries(a.requestHeaders)
                .map(([k, v]) => `${k}: ${v}`)
                .join('\n')}
            />
          ) : (
            <span class="muted">not recorded</span>
          )}
        </dd>
      </dl>
      {onCheck && (
        <Button variant="link" onClick={onCheck}>
          Check this signature
        </Button>
      )}
    </li>
  );
}

function Recovery({ siteId }: { siteId: string }) {
  const [since, setSince] = useState('');
  const [count, setCount] = useState<{ since: string; failed: number } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [fieldError, setFieldError] = useState('');
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const countFailed = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSaid('');
    const iso = isoOf(since);
    if (!iso) return setFieldError('Choose a date and time.');
    setFieldError('');
    setBusy(true);
    try {
      const c = await call(() => client.GET('/sites/{siteId}/delivery-recovery', { params: { path: { siteId }, query: { since: iso } } }));
      if (c.failed === 0) setSaid(`No delivery of an event since ${new Date(c.since).toLocaleString()} ended failed: nothing to recover.`);
      else setCount(c);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card stack" onSubmit={countFailed} aria-labelledby="recover-title" noValidate>
      <h2 id="recover-title">Recover failed deliveries</h2>
      <p class="hint">
        After an outage of your receiver, or while the address was disabled: every delivery of an event created since a time that ended failed is sent again
        (tests excluded). First the count, then you confirm.
      </p>
      <div class="row">
        <TimeField
          id="recover-since"
          label="Failed since"
          value={since}
          onInput={(e) => setSince((e.currentTarget as HTMLInputElement).value)}
          error={fieldError}
        />
        <Button submit busy={busy}>
          Count failed deliveries
        </Button>
      </div>
      <ErrorBanner error={error} />
      <p role="status">{said}</p>
      {count && (
        <ConfirmDialog
          title={`Send ${count.failed} failed ${count.failed === 1 ? 'delivery' : 'deliveries'} again?`}
          confirm={`Send ${count.failed} again`}
          onCancel={() => setCount(null)}
          onConfirm={async () => {
            const q = await call(() => client.POST('/sites/{siteId}/delivery-recovery', { params: { path: { siteId } }, body: { since: count.since } }));
            setCount(null);
            setSaid(`Queued ${q.eventIds.length} ${q.eventIds.length === 1 ? 'delivery' : 'deliveries'} again. Refresh the log to follow them.`);
          }}
        >
          <p>
            {count.failed} {count.failed === 1 ? 'delivery' : 'deliveries'} of events created since {new Date(count.since).toLocaleString()} ended failed. Each
            is sent again with its id and body, its attempt numbers continuing. Your receiver should ignore ids it already took.
          </p>
        </ConfirmDialog>
      )}
    </form>
  );
}
