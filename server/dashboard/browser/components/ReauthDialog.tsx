import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, call, client } from '../api';
import { registerReauthView, settleReauth } from '../reauth';
import { useAction } from '../use-action';
import { Button } from './Button';
import { Dialog } from './Dialog';
import { ErrorBanner } from './ErrorBanner';
import { TextInput } from './Field';

/**
 * "Confirm your password": shown while reauth.ts has a question open. A confirmed password opens the
 * session's 10-minute window (POST /session/sudo) and the operation that asked is sent again once;
 * Cancel fails it with the server's refusal.
 */
export function ReauthHost() {
  const [open, setOpen] = useState(false);
  useEffect(() => registerReauthView(setOpen), []);
  return open ? <ReauthDialog /> : null;
}

function ReauthDialog() {
  const [password, setPassword] = useState('');
  const [wrong, setWrong] = useState<string | null>(null);
  const { busy, error, submit } = useAction(async () => {
    setWrong(null);
    try {
      await call(() => client.POST('/session/sudo', { body: { password } }));
    } catch (err) {
      // 403 here is a wrong password; the server's words say so.
      if (err instanceof ApiFailure && err.code === 'forbidden') return setWrong(err.message);
      throw err;
    }
    settleReauth(true);
  });
  return (
    <Dialog title="Confirm your password" onClose={busy ? undefined : () => settleReauth(false)}>
      <form class="stack" onSubmit={submit}>
        <p>This changes who can reach your account or sites. Enter your password to continue; you will not be asked again for 10 minutes.</p>
        <ErrorBanner error={error} />
        {wrong && (
          <div class="banner banner-error" role="alert">
            <p>{wrong}</p>
          </div>
        )}
        <TextInput label="Password" type="password" value={password} onValue={setPassword} required autocomplete="current-password" autofocus />
        <div class="actions">
          <Button onClick={() => settleReauth(false)} disabled={busy}>
            Cancel
          </Button>
          <Button variant="primary" submit busy={busy}>
            Confirm
          </Button>
        </div>
      </form>
    </Dialog>
  );
}
