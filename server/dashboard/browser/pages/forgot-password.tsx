import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { ErrorBanner } from '../components/ErrorBanner';
import { EmptyState } from '../components/EmptyState';
import { TextInput } from '../components/Field';
import { NEW_PASSWORD_MIN_LENGTH } from '../components/CredentialFields';
import { Link } from '../components/Link';
import { useAction } from '../use-action';
import { navigate } from '../router';
import { takeToken, TOKEN_SHAPE } from '../link-token';
import { SignInForm } from './sign-in';

/**
 * Forgot password, first half: an email to send a link to. The page says the same thing whether
 * or not the email has an account, as the server does.
 */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const { busy, error, submit } = useAction(async () => {
    const answer = await call(() => client.POST('/password-resets', { body: { email } }), { signIn: false });
    setSent(answer.message);
  });
  return (
    <main id="main" class="narrow">
      <h1>Forgot your password?</h1>
      {sent ? (
        <p role="status">{sent}</p>
      ) : (
        <form class="stack" onSubmit={submit} aria-label="Send a link">
          <p>Give the email you sign in with. A link to set a new password is sent to it; it works once, for one hour.</p>
          <ErrorBanner error={error} />
          <TextInput label="Email" type="email" value={email} onValue={setEmail} required autocomplete="username" autofocus />
          <Button variant="primary" submit busy={busy}>
            Send the link
          </Button>
        </form>
      )}
      <p>
        <Link to="/">Back to sign-in</Link>
      </p>
    </main>
  );
}

/**
 * Forgot password, second half: the emailed link (`/dashboard/reset-password#token=...`) opens
 * this page; the new password ends every session of the account, so the person then signs in.
 */
export function ResetPasswordPage({ onSignedIn }: { onSignedIn: () => Promise<void> }) {
  const [token] = useState(takeToken);
  const [password, setPassword] = useState('');
  const [doneFor, setDoneFor] = useState<string | null>(null);
  const { busy, error, submit } = useAction(async () => {
    const done = await call(() => client.POST('/password-resets/complete', { body: { token, newPassword: password } }), { signIn: false });
    setPassword('');
    setDoneFor(done.email);
  });
  if (doneFor !== null)
    return (
      <main id="main" class="narrow">
        <h1>Your new password is set</h1>
        <p role="status">Every session of the account was ended. Sign in with the new password.</p>
        <SignInForm
          email={doneFor}
          onSignedIn={async () => {
            await onSignedIn();
            navigate('/', true);
          }}
        />
      </main>
    );
  return (
    <main id="main" class="narrow">
      <h1>Set a new password</h1>
      {!TOKEN_SHAPE.test(token) ? (
        <EmptyState title="This link has no token in it.">
          Open the whole link from the email, or <Link to="/forgot-password">ask for a new one</Link>.
        </EmptyState>
      ) : (
        <form class="stack" onSubmit={submit} aria-label="Set a new password">
          <ErrorBanner error={error} />
          <TextInput
            label="New password"
            type="password"
            value={password}
            onValue={setPassword}
            required
            minLength={NEW_PASSWORD_MIN_LENGTH}
            autocomplete="new-password"
            autofocus
            hint={`At least ${NEW_PASSWORD_MIN_LENGTH} characters.`}
          />
          <Button variant="primary" submit busy={busy}>
            Set the new password
          </Button>
        </form>
      )}
    </main>
  );
}
