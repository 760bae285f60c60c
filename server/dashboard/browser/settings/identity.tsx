import { useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { ShownOnce } from '../components/ShownOnce';
import { useAction } from '../use-action';
import { SubmitRow } from '../components/SubmitRow';

type Mode = Schemas['IdentityMode'];

const MODES: { mode: Mode; label: string; meaning: string }[] = [
  { mode: 'off', label: 'Off', meaning: 'Visitors are anonymous; an identity a page sends is ignored.' },
  {
    mode: 'optional',
    label: 'Optional',
    meaning: 'A visitor whose page vouches for them with a valid identity hash is shown as verified; others chat anonymously.',
  },
  { mode: 'enforce', label: 'Enforce', meaning: 'Only verified visitors can chat: the window refuses a visitor without a valid identity hash.' },
];

/**
 * Identity verification: the mode, and the secret your server signs visitors' identities with. The
 * secret is shown once, when it is made (the first mode other than off) or rotated.
 */
export function IdentityVerification({
  siteId,
  mode,
  secretSet,
  onChange,
}: {
  siteId: string;
  mode: Mode;
  secretSet: boolean;
  onChange: (mode: Mode, secretSet: boolean) => void;
}) {
  const [chosen, setChosen] = useState<Mode>(mode);
  const [secret, setSecret] = useState<string | null>(null);
  const [rotating, setRotating] = useState(false);
  const [saved, setSaved] = useState('');
  const save = useAction(async () => {
    setSaved('');
    const s = await call(() => client.PATCH('/sites/{siteId}', { params: { path: { siteId } }, body: { identityMode: chosen } }));
    onChange(s.identityMode, s.identitySecretSet);
    if (s.identitySecret) setSecret(s.identitySecret);
    setSaved('Saved.');
  });

  return (
    <section class="card stack" aria-labelledby="identity-title">
      <h2 id="identity-title">Identity verification</h2>
      <p>
        Your server can vouch for a signed-in customer: it computes an HMAC-SHA256 of the visitor's id with the identity secret and your page passes it to the
        window, so agents see who they talk to and nobody can pretend to be that customer. Keep the secret on your server, never in a page.
      </p>
      {secret && <ShownOnce label="Identity secret" value={secret} onDone={() => setSecret(null)} />}
      <form class="stack" onSubmit={save.submit} aria-labelledby="identity-mode-legend">
        <ErrorBanner error={save.error} />
        <fieldset class="checks">
          <legend id="identity-mode-legend">Mode</legend>
          {MODES.map((m) => (
            <label key={m.mode} class="check">
              <input type="radio" name="identity-mode" value={m.mode} checked={chosen === m.mode} onChange={() => setChosen(m.mode)} />
              <span>
                <strong>{m.label}</strong>: {m.meaning}
              </span>
            </label>
          ))}
        </fieldset>
        <SubmitRow busy={save.busy} disabled={chosen === mode} status={saved}>
          Save mode
        </SubmitRow>
      </form>
      <div class="stack">
        <p class="hint">
          {secretSet
            ? 'A secret is set. It is never shown again; if it leaked, or you lost it, rotate it.'
            : 'No secret yet: one is made, and shown once, when you choose a mode other than off, or when you rotate.'}
        </p>
        <div>
          <Button onClick={() => setRotating(true)}>Rotate identity secret</Button>
        </div>
      </div>
      {rotating && (
        <ConfirmDialog
          title="Rotate the identity secret?"
          confirm="Rotate secret"
          danger
          onCancel={() => setRotating(false)}
          onConfirm={async () => {
            const r = await call(() => client.POST('/sites/{siteId}/identity-secret/rotate', { params: { path: { siteId } } }));
            onChange(r.identityMode, r.identitySecretSet);
            setSecret(r.identitySecret);
            setRotating(false);
          }}
        >
          <p>
            A new secret is made and shown once. The old one stops at once: hashes made with it are refused, and visitors verified with it must be vouched for
            again. Put the new one on your server right away.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
