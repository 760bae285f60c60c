import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { CredentialFields } from '../components/CredentialFields';
import { ErrorBanner } from '../components/ErrorBanner';
import { EmptyState } from '../components/EmptyState';
import { navigate } from '../router';
import { useAction } from '../use-action';
import { takeToken, TOKEN_SHAPE } from '../link-token';

/**
 * The first owner, from the setup link a fresh server prints while no account exists
 * (`/dashboard/setup#token=...`): the account made here owns every site there is, and is signed in.
 */
export function SetupPage({ onDone }: { onDone: () => Promise<void> }) {
  const [token] = useState(takeToken);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useAction(async () => {
    const made = await call(() => client.POST('/setup', { body: { token, email, password } }), { signIn: false });
    await onDone();
    const first = made.sites[0];
    navigate(first ? `/sites/${first.id}/inbox` : '/', true);
  });
  return (
    <main id="main" class="narrow">
      <h1>Set up the service</h1>
      {!TOKEN_SHAPE.test(token) ? (
        <EmptyState title="This link has no setup token in it.">
          Open the whole link the server printed when it started. Printed no more, or expired? Run <code>npm run admin -- setup link</code> on the server for a
          new one.
        </EmptyState>
      ) : (
        <form class="stack" onSubmit={submit}>
          <p>Create the first owner account. It owns every site the service has, and can invite the rest of the team.</p>
          <ErrorBanner error={error} />
          <CredentialFields email={email} onEmail={setEmail} password={password} onPassword={setPassword} kind="new" />
          <Button variant="primary" submit busy={busy}>
            Create the owner account
          </Button>
        </form>
      )}
    </main>
  );
}
