/**
 * The signed-in person's own account, whatever their role on any site (`/dashboard/account`):
 * their display name, their email (verify it, change it), change the password, see and end their sessions, make, list and revoke management tokens for
 * scripts (a token made before the last password change is called out), and read the account's
 * security log. Every call is /manage/v1 on the person's own resources (no site in the path).
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, call, callPage, client, type Me, type Schemas } from '../api';
import { Button } from '../components/Button';
import { TextInput } from '../components/Field';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { ShownOnce } from '../components/ShownOnce';
import { Table } from '../components/Table';
import { useAction } from '../use-action';
import { usePagedList } from '../use-paged-list';
import { LoadMore } from '../components/LoadMore';
import { MyAlerts } from '../settings/my-alerts';
import { SubmitRow } from '../components/SubmitRow';

type Session = Schemas['Session'];
type Token = Schemas['Token'];
type SecurityEntry = Schemas['SecurityLogEntry'];

export function AccountPage({ me }: { me: Me }) {
  // Bumped when the password changes: the other sessions ended, so the list is read again.
  const [sessionsVersion, setSessionsVersion] = useState(0);
  // Bumped when a password change revoked every token: the list is read again.
  const [tokensVersion, setTokensVersion] = useState(0);
  const [changedAt, setChangedAt] = useState(me.account.passwordChangedAt);
  return (
    <div class="stack account-page">
      <p class="muted">
        Signed in as <strong>{me.account.email}</strong>. Password last changed <RelativeTime at={changedAt} />.
      </p>
      <DisplayName me={me} />
      <Email me={me} />
      <MyAlerts me={me} />
      <ChangePassword
        onChanged={() => {
          setSessionsVersion((v) => v + 1);
          setTokensVersion((v) => v + 1);
          setChangedAt(new Date().toISOString());
        }}
      />
      <Sessions version={sessionsVersion} />
      <Tokens version={tokensVersion} />
      <SecurityLog version={sessionsVersion} />
    </div>
  );
}

/**
 * The account's display name: what its sites' members see, and visitors on its replies unless a
 * site turns agents' names off. Saved empty, it is cleared: the email's local part shows instead.
 */
function DisplayName({ me }: { me: Me }) {
  const [saved, setSaved] = useState(me.account.displayName ?? '');
  const [value, setValue] = useState(saved);
  const [said, setSaid] = useState('');
  const local = me.account.email.slice(0, me.account.email.indexOf('@'));
  const { busy, error, submit } = useAction(async () => {
    setSaid('');
    const { account } = await call(() => client.PATCH('/me', { body: { displayName: value.trim() || null } }));
    setSaved(account.displayName ?? '');
    setValue(account.displayName ?? '');
    setSaid(account.displayName ? `Saved: you show as “${account.name}”.` : `Cleared: you show as “${account.name}”.`);
  });
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="display-name-title">
      <h2 id="display-name-title">Your name</h2>
      <ErrorBanner error={error} />
      <TextInput
        label="Display name"
        value={value}
        onValue={setValue}
        maxLength={80}
        autocomplete="name"
        hint={`What your team sees, and visitors on your replies unless a site turns agents’ names off. Empty: “${local}”, from your email.`}
      />
      <SubmitRow busy={busy} disabled={value.trim() === saved} status={said}>
        Save name
      </SubmitRow>
    </form>
  );
}

/** The server's words when the current password is wrong (403 here is that, not a missing right); other failures are thrown on. */
async function withCurrentPassword(send: () => Promise<unknown>, wrong: (message: string) => void): Promise<boolean> {
  try {
    await send();
    return true;
  } catch (err) {
    if (err instanceof ApiFailure && err.code === 'forbidden') {
      wrong(err.message);
      return false;
    }
    throw err;
  }
}

/**
 * The account's email: whether it is verified (with the link sent again on request; until then no
 * site can add the account by its email), and a change, which needs the current password and
 * happens when the link sent to the new address is used.
 */
function Email({ me }: { me: Me }) {
  const [resent, setResent] = useState('');
  const [next, setNext] = useState('');
  const [password, setPassword] = useState('');
  const [asked, setAsked] = useState('');
  const [wrong, setWrong] = useState<string | null>(null);
  const resend = useAction(async () => {
    const { emailVerified } = await call(() => client.POST('/email-verifications'));
    setResent(emailVerified ? 'Your email is verified already.' : `A link is on its way to ${me.account.email}. It works once, for 24 hours.`);
  });
  const change = useAction(async () => {
    setAsked('');
    setWrong(null);
    const sent = await withCurrentPassword(() => call(() => client.POST('/email-changes', { body: { newEmail: next, password } })), setWrong);
    if (!sent) return;
    setAsked(`A link is on its way to ${next}: your email changes when you open it (within 24 hours). ${me.account.email} was told.`);
    setNext('');
    setPassword('');
  });
  return (
    <section class="card stack" aria-labelledby="email-title">
      <h2 id="email-title">Email</h2>
      {!me.account.emailVerified && (
        <div class="banner banner-warning" role="status">
          <p>
            <strong>Verify your email.</strong> Until you open the link sent to {me.account.email}, no site can add you by your email and you cannot accept
            another invitation.
          </p>
          <ErrorBanner error={resend.error} />
          <div class="line-row">
            <Button onClick={() => void resend.run()} busy={resend.busy}>
              Send the link again
            </Button>
            <span class="copy-status" role="status">
              {resent}
            </span>
          </div>
        </div>
      )}
      <form class="stack" onSubmit={change.submit} aria-label="Change email">
        <ErrorBanner error={change.error} />
        {wrong && (
          <div class="banner banner-error" role="alert">
            <p>{wrong}</p>
          </div>
        )}
        {asked && (
          <div class="banner banner-info" role="status">
            <p>{asked}</p>
          </div>
        )}
        <TextInput
          label="New email"
          type="email"
          value={next}
          onValue={setNext}
          required
          autocomplete="email"
          hint="A link goes to it; the old address is told."
        />
        <TextInput label="Current password" type="password" value={password} onValue={setPassword} required autocomplete="current-password" />
        <div>
          <Button variant="primary" submit busy={change.busy}>
            Change email
          </Button>
        </div>
      </form>
    </section>
  );
}

function ChangePassword({ onChanged }: { onChanged: () => void }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [revokeTokens, setRevokeTokens] = useState(false);
  const [done, setDone] = useState(false);
  const [wrong, setWrong] = useState<string | null>(null);
  const { busy, error, submit } = useAction(async () => {
    setDone(false);
    setWrong(null);
    if (
      !(await withCurrentPassword(
        () => call(() => client.POST('/password', { body: { currentPassword: current, newPassword: next, revokeTokens } })),
        setWrong,
      ))
    )
      return;
    setCurrent('');
    setNext('');
    setDone(true);
    onChanged();
  });
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="password-title">
      <h2 id="password-title">Change password</h2>
      <ErrorBanner error={error} />
      {wrong && (
        <div class="banner banner-error" role="alert">
          <p>{wrong}</p>
        </div>
      )}
      {done && (
        <div class="banner banner-info" role="status">
          <p>
            Password changed. Every other session of your account was signed out; this one stays.{' '}
            {revokeTokens ? 'Every management token was revoked.' : 'Management tokens keep working: revoke them below if needed.'}
          </p>
        </div>
      )}
      <TextInput label="Current password" type="password" value={current} onValue={setCurrent} required autocomplete="current-password" />
      <TextInput
        label="New password"
        type="password"
        value={next}
        onValue={setNext}
        required
        minLength={12}
        maxLength={256}
        autocomplete="new-password"
        hint="12 to 256 characters. Your other sessions end when it changes."
      />
      <label class="check">
        <input type="checkbox" checked={revokeTokens} onChange={(e) => setRevokeTokens(e.currentTarget.checked)} /> Also revoke every management token
      </label>
      <div>
        <Button variant="primary" submit busy={busy}>
          Change password
        </Button>
      </div>
    </form>
  );
}

/** A User-Agent shortened to what a person recognises: the browser and the system. */
function browserOf(ua: string | null): string {
  if (!ua) return 'unknown browser';
  const browser = /(Edg|Firefox|Chrome|Chromium|Safari)\/[\d.]+/.exec(ua)?.[0].replace('Edg', 'Edge') ?? ua.slice(0, 40);
  const system = /(Windows|Mac OS X|Android|iPhone|iPad|Linux)/.exec(ua)?.[1];
  return system ? `${browser} on ${system.replace('Mac OS X', 'macOS')}` : browser;
}

function Sessions({ version }: { version: number }) {
  const [sessions, setSessions] = useState<Session[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [ended, setEnded] = useState<string | null>(null);

  const load = async () => {
    setError(null);
    try {
      setSessions(await call(() => client.GET('/sessions')));
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => void load(), [version]);

  const end = async (s: Session) => {
    setError(null);
    try {
      await call(() => client.DELETE('/sessions/{sessionId}', { params: { path: { sessionId: s.id } } }));
      setSessions((before) => before?.filter((x) => x.id !== s.id) ?? null);
      setEnded(`The session of ${browserOf(s.userAgent)} is ended: that browser is signed out.`);
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section class="card stack" aria-labelledby="sessions-title">
      <h2 id="sessions-title">My sessions</h2>
      <p class="hint">Each browser you signed in from. A session ends 30 minutes after its last use or 12 hours after sign-in.</p>
      <ErrorBanner error={error} />
      <p class="status-line" role="status">
        {ended}
      </p>
      {sessions === null ? (
        !error && <p class="loading">Loading sessions…</p>
      ) : (
        <Table
          caption="Signed-in browsers"
          rows={sessions}
          rowKey={(s) => s.id}
          columns={[
            {
              header: 'Browser',
              cell: (s) => (
                <>
                  <span title={s.userAgent ?? undefined}>{browserOf(s.userAgent)}</span> {s.current && <span class="tag tag-current">This browser</span>}
                </>
              ),
            },
            { header: 'Address', cell: (s) => s.clientAddress ?? <span class="muted">unknown</span>, class: 'nowrap' },
            { header: 'Signed in', cell: (s) => <RelativeTime at={s.createdAt} />, class: 'nowrap' },
            { header: 'Last used', cell: (s) => <RelativeTime at={s.lastSeenAt} />, class: 'nowrap' },
            {
              header: 'End',
              cell: (s) =>
                s.current ? (
                  <span class="muted">Sign out above</span>
                ) : (
                  <Button onClick={() => void end(s)} aria-label={`End session of ${browserOf(s.userAgent)} from ${s.clientAddress ?? 'an unknown address'}`}>
                    End session
                  </Button>
                ),
            },
          ]}
        />
      )}
    </section>
  );
}

function Tokens({ version }: { version: number }) {
  const [tokens, setTokens] = useState<Token[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<Schemas['CreatedToken'] | null>(null);
  const [revoking, setRevoking] = useState<Token | null>(null);
  const [label, setLabel] = useState('');

  useEffect(() => {
    call(() => client.GET('/tokens')).then(setTokens, setError);
  }, [version]);
  const older = (tokens ?? []).filter((t) => t.madeBeforePasswordChange);

  const create = useAction(async () => {
    const t = await call(() => client.POST('/tokens', { body: { label } }));
    setCreated(t);
    const { token: _value, ...listed } = t;
    setTokens((before) => [listed, ...(before ?? [])]);
    setLabel('');
  });

  return (
    <section class="card stack" aria-labelledby="tokens-title">
      <h2 id="tokens-title">Management tokens</h2>
      <p class="hint">
        For scripts and CI: a token acts as you, with your roles on your sites, on the management API. Send it as <code>Authorization: Bearer wcm_…</code>. A
        password change leaves tokens working.
      </p>
      <ErrorBanner error={error} />
      {older.length > 0 && (
        <div class="banner banner-warning" role="alert">
          <p>
            {older.length === 1
              ? 'A token made before your last password change still works'
              : `${older.length} tokens made before your last password change still work`}
            : {older.map((t) => t.label).join(', ')}. Whoever knew the old password may have made it: revoke it unless it is yours.
          </p>
        </div>
      )}
      {created && <ShownOnce label="Management token" value={created.token} onDone={() => setCreated(null)} />}
      <form class="stack" onSubmit={create.submit} aria-labelledby="new-token-title">
        <h3 id="new-token-title">New token</h3>
        <ErrorBanner error={create.error} />
        <TextInput label="Token label" value={label} onValue={setLabel} required maxLength={200} hint="What will use it, e.g. “deploy script”." />
        <div>
          <Button variant="primary" submit busy={create.busy}>
            Create token
          </Button>
        </div>
      </form>
      {tokens === null ? (
        !error && <p class="loading">Loading tokens…</p>
      ) : (
        <Table
          caption="My management tokens"
          rows={tokens}
          rowKey={(t) => t.id}
          empty={<EmptyState title="No management tokens yet." />}
          columns={[
            {
              header: 'Label',
              cell: (t) => (
                <>
                  {t.label} {t.madeBeforePasswordChange && <span class="tag tag-warning">Before password change</span>}
                </>
              ),
            },
            { header: 'Prefix', cell: (t) => <code>{t.prefix}…</code>, class: 'nowrap' },
            { header: 'Created', cell: (t) => <RelativeTime at={t.createdAt} />, class: 'nowrap' },
            { header: 'Last used', cell: (t) => <RelativeTime at={t.lastUsedAt} />, class: 'nowrap' },
            {
              header: 'Status',
              cell: (t) =>
                t.revokedAt ? (
                  <span class="tag tag-muted">
                    Revoked <RelativeTime at={t.revokedAt} />
                  </span>
                ) : (
                  <Button variant="danger" onClick={() => setRevoking(t)} aria-label={`Revoke ${t.label}`}>
                    Revoke
                  </Button>
                ),
            },
          ]}
        />
      )}
      {revoking && (
        <ConfirmDialog
          title={`Revoke “${revoking.label}”?`}
          confirm="Revoke token"
          danger
          onCancel={() => setRevoking(null)}
          onConfirm={async () => {
            await call(() => client.DELETE('/tokens/{id}', { params: { path: { id: revoking.id } } }));
            const at = new Date().toISOString();
            setTokens((before) => before?.map((t) => (t.id === revoking.id ? { ...t, revokedAt: at } : t)) ?? null);
            setRevoking(null);
          }}
        >
          <p>
            The management API refuses <code>{revoking.prefix}…</code> from its next request on. Whatever uses it stops working. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** Readable names of the security log's actions; an action this page does not know shows as sent. */
const ACTIONS: Record<string, string> = {
  'session.signed_in': 'Signed in',
  'session.sign_in_failed': 'Failed sign-in (wrong password)',
  'session.signed_out': 'Signed out',
  'session.ended': 'Session ended by you',
  'sessions.ended.owner': 'Every session ended by a site owner',
  'sessions.ended.password_change': 'Other sessions ended by a password change',
  'sessions.ended.role_change': 'Every session ended by a role change',
  'sessions.ended.removal': 'Every session ended by a removal from a site',
  'account.password_changed': 'Password changed',
  'account.password_reset': 'Password set through a forgot-password link',
  'sessions.ended.password_reset': 'Every session ended by a forgot-password link',
  'account.email_verified': 'Email verified',
  'account.email_change_requested': 'Email change asked for',
  'account.email_changed': 'Email changed',
  'token.created': 'Management token created',
  'token.revoked': 'Management token revoked',
  'sudo.granted': 'Password confirmed',
  'sudo.refused': 'Password confirmation refused (wrong password)',
};

function SecurityLog({ version }: { version: number }) {
  const list = usePagedList<SecurityEntry>(
    (cursor) => callPage(() => client.GET('/security-log', { params: { query: { limit: 25, ...(cursor ? { cursor } : {}) } } })),
    [version],
  );
  const { items: entries, error } = list;
  return (
    <section class="card stack" aria-labelledby="security-log-title">
      <h2 id="security-log-title">Security log</h2>
      <p class="hint">What happened to your sign-ins, sessions, password and tokens in the last 90 days, newest first.</p>
      <ErrorBanner error={error} />
      {entries === null ? (
        !error && <p class="loading">Loading the security log…</p>
      ) : (
        <Table
          caption="Security log"
          rows={entries}
          rowKey={(e) => e.id}
          empty={<EmptyState title="Nothing yet." />}
          columns={[
            { header: 'When', cell: (e) => <RelativeTime at={e.createdAt} />, class: 'nowrap' },
            { header: 'What', cell: (e) => ACTIONS[e.action] ?? e.action },
            { header: 'Address', cell: (e) => e.clientAddress ?? <span class="muted">—</span>, class: 'nowrap' },
            { header: 'Browser', cell: (e) => (e.userAgent ? <span title={e.userAgent}>{browserOf(e.userAgent)}</span> : <span class="muted">—</span>) },
          ]}
        />
      )}
      <LoadMore list={list} label="Older entries" />
    </section>
  );
}
