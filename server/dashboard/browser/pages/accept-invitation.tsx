import { useState } from 'preact/hooks';
import { call, client, type Me } from '../api';
import { Button } from '../components/Button';
import { TextInput } from '../components/Field';
import { ErrorBanner } from '../components/ErrorBanner';
import { EmptyState } from '../components/EmptyState';
import { navigate } from '../router';
import { useAction } from '../use-action';

/**
 * The token from the invitation link: in the fragment (`#token=...`, which browsers never send to a
 * server nor in Referer), or `?token=` from an older link. Read once, then dropped from the address
 * bar and the history, so it does not linger where the page was.
 */
function takeToken(): string {
  const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? new URLSearchParams(location.search).get('token') ?? '';
  if (location.hash || location.search) history.replaceState(null, '', location.pathname);
  return token;
}

/** Joins a site by an invitation link: as the signed-in account, or with the invited email and a password. */
export function AcceptInvitationPage({ me, onJoined }: { me: Me | null; onJoined: () => Promise<void> }) {
  const [token] = useState(takeToken);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useAction(async () => {
    const body = me ? { token } : { token, email, password };
    const joined = await call(() => client.POST('/invitations/accept', { body }), { signIn: false });
    await onJoined();
    navigate(`/sites/${joined.site.id}/inbox`, true);
  });
  return (
    <main id="main" class="narrow">
      <h1>Accept an invitation</h1>
      {!/^[0-9A-Za-z]{20,100}$/.test(token) ? (
        <EmptyState title="This link has no invitation in it.">Open the whole link from the invitation, or ask the owner for a new one.</EmptyState>
      ) : (
        <form class="stack" onSubmit={submit}>
          <ErrorBanner error={error} />
          {me ? (
            <p>
              Join the site as <strong>{me.account.email}</strong>.
            </p>
          ) : (
            <>
              <TextInput label="Email (the invited one)" type="email" value={email} onValue={setEmail} required autocomplete="username" />
              <TextInput
                label="Password"
                type="password"
                value={password}
                onValue={setPassword}
                required
                minLength={12}
                autocomplete="new-password"
                hint="At least 12 characters. New here: this becomes your password. Already have an account: your password."
              />
            </>
          )}
          <Button variant="primary" submit busy={busy}>
            Accept invitation
          </Button>
        </form>
      )}
    </main>
  );
}
