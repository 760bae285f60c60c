/**
 * A site's settings (owners): its name, the origins whose pages may open the chat window, identity
 * verification (mode and secret), the embed snippet with a check that a page carries it, whose
 * name visitors see on replies, the tags agents put on conversations, and the mail log with its test email. The sections are in
 * settings/; this page reads the site once and hands each its part (a section with a resource of
 * its own reads that itself).
 */
import { useEffect, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import type { PageProps } from '../types';
import { ErrorBanner } from '../components/ErrorBanner';
import { SiteName } from '../settings/name';
import { AllowedOrigins } from '../settings/origins';
import { IdentityVerification } from '../settings/identity';
import { EmbedSnippet } from '../settings/embed';
import { AgentNames } from '../settings/agent-names';
import { VisitorContextSettings } from '../settings/visitor-context';
import { BusinessHoursSettings } from '../settings/business-hours';
import { TagSettings } from '../settings/tags';
import { MailSettings } from '../settings/mail';

export type ManagedSite = Schemas['ManagedSite'];

export function SettingsPage({ site }: PageProps) {
  const [settings, setSettings] = useState<ManagedSite | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    call(() => client.GET('/sites/{siteId}', { params: { path: { siteId: site.id } } })).then(setSettings, setError);
  }, [site.id]);

  if (!settings) return error ? <ErrorBanner error={error} /> : <p class="loading">Loading settings…</p>;
  const update = (s: Partial<ManagedSite>) => setSettings((before) => before && { ...before, ...s });
  return (
    <div class="stack settings">
      <SiteName siteId={site.id} name={settings.name} onSaved={(name) => update({ name })} />
      <AllowedOrigins siteId={site.id} origins={settings.allowedOrigins} onChange={(allowedOrigins) => update({ allowedOrigins })} />
      <IdentityVerification
        siteId={site.id}
        mode={settings.identityMode}
        secretSet={settings.identitySecretSet}
        onChange={(identityMode, identitySecretSet) => update({ identityMode, identitySecretSet })}
      />
      <VisitorContextSettings siteId={site.id} />
      <BusinessHoursSettings siteId={site.id} />
      <EmbedSnippet siteId={site.id} origins={settings.allowedOrigins} />
      <AgentNames siteId={site.id} siteName={settings.name} />
      <TagSettings siteId={site.id} />
      <MailSettings siteId={site.id} />
    </div>
  );
}
