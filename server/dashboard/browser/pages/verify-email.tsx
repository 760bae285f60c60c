import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { ErrorBanner } from '../components/ErrorBanner';
import { EmptyState } from '../components/EmptyState';
import { Link } from '../components/Link';
import { useAction } from '../use-action';
import { takeToken, TOKEN_SHAPE } from '../link-token';

/**
 * The page an emailed address link opens (`/dashboard/verify-email#token=...`): it verifies the
 * account's email, or moves the account to the new one. The link is used on a click, not on load,
 * so a mail scanner that opens links does not spend it. No session is needed: the link is the proof.
 */
export function VerifyEmailPage({ onDone }: { onDone: () => Promise<void> }) {
  const [token] = useState(takeToken);
  const [done, setDone] = useState<{ email: string; changed: boolean } | null>(null);
  const { busy, error, submit } = useAction(async () => {
    setDone(await call(() => client.POST('/email-links/complete', { body: { token } }), { signIn: false }));
    await onDone();
  });
  return (
    <main id="main" class="narrow">
      <h1>Confirm your email address</h1>
      {done ? (
        <p role="status">
          {done.changed ? `Your account's email is now ${done.email}.` : `${done.email} is verified.`} <Link to="/">Open the dashboard</Link>
        </p>
      ) : !TOKEN_SHAPE.test(token) ? (
        <EmptyState title="This link has no token in it.">
          Open the whole link from the email, or ask for a new one from <Link to="/account">your account page</Link>.
        </EmptyState>
      ) : (
        <form class="stack" onSubmit={submit} aria-label="Confirm the address">
          <p>This confirms that the address the link was sent to is yours. The link works once, for 24 hours.</p>
          <ErrorBanner error={error} />
          <Button variant="primary" submit busy={busy}>
            Confirm this address
          </Button>
        </form>
      )}
    </main>
  );
}
