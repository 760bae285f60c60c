/**
 * A site's team (owners): the members and their roles, invitations (made, listed, withdrawn), a
 * member's sessions ended, and the audit log. The sections are in team/; the members are read here
 * once, since the audit log names its actors by their emails.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, client, type Schemas } from '../api';
import type { PageProps } from '../types';
import { ErrorBanner } from '../components/ErrorBanner';
import { Members } from '../team/members';
import { Invitations } from '../team/invitations';
import { AuditLog } from '../team/audit';

export type Member = Schemas['Member'];

export function TeamPage({ site, me }: PageProps) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  // Bumped by every change made here, so the audit log shows it without a reload.
  const [changes, setChanges] = useState(0);
  const changed = () => setChanges((n) => n + 1);

  const loadMembers = async () => {
    try {
      setMembers(await call(() => client.GET('/sites/{siteId}/members', { params: { path: { siteId: site.id } } })));
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => void loadMembers(), [site.id]);

  return (
    <div class="stack team">
      <ErrorBanner error={error} />
      {members ? (
        <Members
          siteId={site.id}
          me={me}
          members={members}
          onChange={(next) => {
            setMembers(next);
            changed();
          }}
          onAudited={changed}
        />
      ) : (
        !error && <p class="loading">Loading members…</p>
      )}
      <Invitations siteId={site.id} onChange={changed} />
      <AuditLog siteId={site.id} me={me} version={changes} />
    </div>
  );
}
