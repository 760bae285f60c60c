import { useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { CredentialFields } from '../components/CredentialFields';
import { ErrorBanner } from '../components/ErrorBanner';
import { Link } from '../components/Link';
import { useAction } from '../use-action';

export type SignedIn = Schemas['SignInResponse']['data'];

/**
 * Email and password to a session. Used by the sign-in page and by the dialog that opens over a
 * page when its session ended. A wrong password and an unknown email get the server's one answer.
 */
export function SignInForm({ email: initialEmail = '', onSignedIn }: { email?: string; onSignedIn: (s: SignedIn) => void | Promise<void> }) {
  const [email, setEmail] = useState(initialEmail);
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useAction(async () => {
    const signedIn = await call(() => client.POST('/session', { body: { email, password } }), { signIn: false });
    setPassword('');
    await onSignedIn(signedIn);
  });
  return (
    <form class="stack" onSubmit={submit} aria-label="Sign in">
      <ErrorBanner error={error} />
      <CredentialFields
        email={email}
        onEmail={setEmail}
        password={password}
        onPassword={setPassword}
        kind="current"
        autofocus={initialEmail ? 'password' : 'email'}
      />
      <Button variant="primary" submit busy={busy}>
        Sign in
      </Button>
    </form>
  );
}

export function SignInPage({ onSignedIn }: { onSignedIn: () => Promise<void> }) {
  return (
    <main id="main" class="narrow">
      <h1>Sign in</h1>
      <SignInForm onSignedIn={onSignedIn} />
      <p>
        <Link to="/forgot-password">Forgot your password?</Link>
      </p>
      <p class="muted">No account? An owner of a site invites you by a link.</p>
    </main>
  );
}
