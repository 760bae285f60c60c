import { useEffect, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { ErrorBanner } from '../components/ErrorBanner';
import { TextInput } from '../components/Field';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

type Hours = Schemas['BusinessHours'];
type Day = keyof Hours['week'];
const DAYS: [Day, string][] = [
  ['mon', 'Monday'],
  ['tue', 'Tuesday'],
  ['wed', 'Wednesday'],
  ['thu', 'Thursday'],
  ['fri', 'Friday'],
  ['sat', 'Saturday'],
  ['sun', 'Sunday'],
];

/** A day's ranges as typed: "09:00-12:00, 13:00-17:00"; the service checks them and names each problem. */
const rangesText = (ranges: Hours['week'][Day]) => ranges.map((r) => r.join('-')).join(', ');
const rangesOf = (text: string): Hours['week'][Day] =>
  text
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean)
    .map((r) => {
      const [from = '', to = ''] = r.split('-').map((t) => t.trim());
      return [from, to];
    });

/** The form's name for a field the service names in a refusal (`/body/week/tue/0` is Tuesday). */
function fieldOf(path: string): string | undefined {
  const day = /^\/body\/week\/(\w+)/.exec(path)?.[1];
  if (day) return DAYS.find(([d]) => d === day)?.[1];
  return { '/body/timeZone': 'Time zone', '/body/awayMessage': 'Away message' }[path];
}

/**
 * Business hours and the away message (docs/window.md, "Away"): outside them, or when no member has
 * the inbox open, the chat window says when the team is back and offers to email the replies.
 */
export function BusinessHoursSettings({ siteId }: { siteId: string }) {
  const [hours, setHours] = useState<Hours | null>(null);
  const [days, setDays] = useState<Record<Day, string> | null>(null);
  const [status, setStatus] = useState('');
  const [loadError, setLoadError] = useState<unknown>(null);
  const show = (h: Hours) => {
    // A site never set starts from the browser's zone, the usual choice.
    const zone = h.enabled ? h.timeZone : Intl.DateTimeFormat().resolvedOptions().timeZone || h.timeZone;
    setHours({ ...h, timeZone: zone });
    setDays(Object.fromEntries(DAYS.map(([d]) => [d, rangesText(h.week[d])])) as Record<Day, string>);
  };
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}/business-hours', { params: { path: { siteId } } })).then(show, setLoadError);
  }, [siteId]);
  const save = useAction(async () => {
    setStatus('');
    const week = Object.fromEntries(DAYS.map(([d]) => [d, rangesOf(days![d])])) as Hours['week'];
    const body = { ...hours!, week, awayMessage: hours!.awayMessage?.trim() || null };
    show(await call(() => client.PUT('/sites/{siteId}/business-hours', { params: { path: { siteId } }, body })));
    setStatus('Saved.');
  });

  return (
    <section class="card stack" aria-labelledby="business-hours-title">
      <h2 id="business-hours-title">Business hours</h2>
      <p>
        Outside these hours, or when no one has the inbox open, the chat window tells visitors when you are back and offers to email them the replies they miss.
      </p>
      <ErrorBanner error={loadError} />
      {hours && days && (
        <form class="stack" onSubmit={save.submit}>
          <ErrorBanner error={save.error} field={fieldOf} />
          <label class="check">
            <input type="checkbox" checked={hours.enabled} onChange={(e) => setHours({ ...hours, enabled: e.currentTarget.checked })} />
            <span>
              <strong>Use business hours.</strong> Off: the window is away only when no one has the inbox open.
            </span>
          </label>
          <label class="check">
            <input
              type="checkbox"
              checked={hours.awayWhenNoAgentOnline !== false}
              onChange={(e) => setHours({ ...hours, awayWhenNoAgentOnline: e.currentTarget.checked })}
            />
            <span>
              <strong>Away while no one has the inbox open.</strong> Turn it off when replies come through the API (a CRM): the window is then away only outside
              the hours.
            </span>
          </label>
          <TextInput label="Time zone" value={hours.timeZone} onValue={(timeZone) => setHours({ ...hours, timeZone })} hint="For example Europe/Berlin." />
          {DAYS.map(([d, name]) => (
            <TextInput
              key={d}
              label={name}
              value={days[d]}
              onValue={(v) => setDays({ ...days, [d]: v })}
              hint={d === 'mon' ? 'Ranges like 09:00-12:00, 13:00-17:00; empty for a day off.' : undefined}
              disabled={!hours.enabled}
            />
          ))}
          <TextInput
            label="Away message"
            value={hours.awayMessage ?? ''}
            onValue={(awayMessage) => setHours({ ...hours, awayMessage })}
            maxLength={1000}
            hint="Shown in the chat window while away."
          />
          <SubmitRow busy={save.busy} status={status}>
            Save
          </SubmitRow>
        </form>
      )}
    </section>
  );
}
