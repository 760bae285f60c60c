/**
 * Creating a site (`/dashboard/new-site`, and the dashboard itself for an account with no site, as
 * the first owner on MySQL is, where no demo site is made): the account becomes the new site's
 * owner and lands on its settings, where the chat window's origins are set.
 */
import { useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { ErrorBanner } from '../components/ErrorBanner';
import { TextInput } from '../components/Field';
import { useAction } from '../use-action';

export function NewSitePage({ first, onCreated }: { first: boolean; onCreated: (siteId: string) => Promise<void> }) {
  const [name, setName] = useState('');
  const { busy, error, submit } = useAction(async () => {
    const site = await call(() => client.POST('/sites', { body: { name: name.trim() } }));
    await onCreated(site.id);
  });
  return (
    <div class="stack">
      {first && (
        <div class="banner banner-info" role="note">
          <p>
            <strong>You are not a member of any site yet.</strong> Create one to start: you become its owner, then allow your website’s pages to open the chat
            window. To join an existing site instead, ask one of its owners to invite you.
          </p>
        </div>
      )}
      <form class="card stack" onSubmit={submit} aria-labelledby="new-site-title">
        <h2 id="new-site-title">Create a site</h2>
        <ErrorBanner error={error} />
        <TextInput
          label="Site name"
          value={name}
          onValue={setName}
          required
          maxLength={200}
          hint="Your website or shop, e.g. “Acme shop”. You can rename it later."
        />
        <div>
          <Button variant="primary" submit busy={busy} disabled={!name.trim()}>
            Create site
          </Button>
        </div>
      </form>
    </div>
  );
}
