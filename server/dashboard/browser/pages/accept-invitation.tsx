import { useState } from 'preact/hooks';
import { call, client, type Me } from '../api';
import { Button } from '../components/Button';
import { CredentialFields } from '../components/CredentialFields';
import { ErrorBanner } from '../components/ErrorBanner';
import { EmptyState } from '../components/EmptyState';
import { navigate } from '../router';
import { useAction } from '../use-action';
import { takeToken, TOKEN_SHAPE } from '../link-token';

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
      {!TOKEN_SHAPE.test(token) ? (
        <EmptyState title="This link has no invitation in it.">Open the whole link from the invitation, or ask the owner for a new one.</EmptyState>
      ) : (
        <form class="stack" onSubmit={submit}>
          <ErrorBanner error={error} />
          {me ? (
            <p>
              Join the site as <strong>{me.account.email}</strong>.
            </p>
          ) : (
            <CredentialFields
              email={email}
              onEmail={setEmail}
              password={password}
              onPassword={setPassword}
              kind="new"
              emailLabel="Email (the invited one)"
              passwordHint="New here: this becomes your password. Already have an account: your password."
            />
          )}
          <Button variant="primary" submit busy={busy}>
            Accept invitation
          </Button>
        </form>
      )}
    </main>
  );
}
