import { useState } from 'preact/hooks';
import { ApiFailure, call, client, type Me, type Role, type Schemas } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { RelativeTime } from '../components/RelativeTime';
import { Table } from '../components/Table';

type Member = Schemas['Member'];
type Pending = { kind: 'role'; member: Member; role: Role } | { kind: 'remove'; member: Member } | { kind: 'sessions'; member: Member };

const other = (r: Role): Role => (r === 'owner' ? 'agent' : 'owner');

/**
 * The members with their roles. A role change and a removal end that member's sessions; the server
 * keeps at least one owner, and its refusal is shown as it words it (not as a missing right).
 */
export function Members({
  siteId,
  me,
  members,
  onChange,
  onAudited,
}: {
  siteId: string;
  me: Me;
  members: Member[];
  onChange: (m: Member[]) => void;
  onAudited: () => void;
}) {
  const [pending, setPending] = useState<Pending | null>(null);
  const [refusal, setRefusal] = useState<string | null>(null);
  const [said, setSaid] = useState('');
  const owners = members.filter((m) => m.role === 'owner').length;
  const path = (m: Member) => ({ params: { path: { siteId, accountId: m.accountId } } });
  const you = (m: Member) => m.accountId === me.account.id;

  /** A 403 here is the last-owner rule (the page is for owners only): its message says what to do. */
  const attempt = async (action: () => Promise<void>) => {
    setRefusal(null);
    setSaid('');
    try {
      await action();
    } catch (err) {
      if (err instanceof ApiFailure && err.code === 'forbidden') {
        setRefusal(err.message);
        setPending(null);
        return;
      }
      throw err;
    }
    setPending(null);
  };

  const confirm = async () => {
    if (!pending) return;
    const m = pending.member;
    if (pending.kind === 'role') {
      const role = pending.role;
      await attempt(async () => {
        const changed = await call(() => client.PATCH('/sites/{siteId}/members/{accountId}', { ...path(m), body: { role } }));
        onChange(members.map((x) => (x.accountId === changed.accountId ? changed : x)));
        setSaid(`${m.email} is now ${role}; their sessions ended.`);
      });
    } else if (pending.kind === 'remove') {
      await attempt(async () => {
        await call(() => client.DELETE('/sites/{siteId}/members/{accountId}', path(m)));
        onChange(members.filter((x) => x.accountId !== m.accountId));
        setSaid(`${m.email} was removed from the site.`);
      });
    } else {
      await attempt(async () => {
        const { ended } = await call(() => client.DELETE('/sites/{siteId}/members/{accountId}/sessions', path(m)));
        setSaid(`${ended} session${ended === 1 ? '' : 's'} of ${m.email} ended.`);
        onAudited();
      });
    }
  };

  return (
    <section class="card stack" aria-labelledby="members-title">
      <h2 id="members-title">Members</h2>
      <p class="hint">Owners can do everything on the site; agents answer visitors in the inbox. A site keeps at least one owner.</p>
      {refusal && (
        <div class="banner banner-error" role="alert">
          <p>{refusal}</p>
        </div>
      )}
      <p class="status-line" role="status">
        {said}
      </p>
      <Table
        caption="Members of the site"
        rows={members}
        rowKey={(m) => m.accountId}
        columns={[
          {
            header: 'Member',
            cell: (m) => (
              <>
                {m.displayName ? (
                  <>
                    {m.displayName} <span class="muted">{m.email}</span>
                  </>
                ) : (
                  m.email
                )}{' '}
                {you(m) && <span class="tag tag-current">you</span>}
              </>
            ),
          },
          { header: 'Role', cell: (m) => m.role },
          { header: 'Joined', cell: (m) => <RelativeTime at={m.joinedAt} />, class: 'nowrap' },
          {
            header: 'Actions',
            cell: (m) => (
              <span class="line-row">
                <Button onClick={() => setPending({ kind: 'role', member: m, role: other(m.role) })} aria-label={`Make ${other(m.role)}: ${m.email}`}>
                  Make {other(m.role)}
                </Button>
                {!you(m) && (
                  <Button onClick={() => setPending({ kind: 'sessions', member: m })} aria-label={`End sessions of ${m.email}`}>
                    End sessions
                  </Button>
                )}
                <Button variant="danger" onClick={() => setPending({ kind: 'remove', member: m })} aria-label={`Remove ${m.email}`}>
                  Remove
                </Button>
              </span>
            ),
          },
        ]}
      />
      {pending && (
        <ConfirmDialog
          title={
            pending.kind === 'role'
              ? `Make ${pending.member.email} ${pending.role}?`
              : pending.kind === 'remove'
                ? `Remove ${pending.member.email}?`
                : `End the sessions of ${pending.member.email}?`
          }
          confirm={pending.kind === 'role' ? `Make ${pending.role}` : pending.kind === 'remove' ? 'Remove member' : 'End sessions'}
          danger={pending.kind !== 'role'}
          onCancel={() => setPending(null)}
          onConfirm={confirm}
        >
          {pending.kind === 'role' && (
            <p>
              {pending.role === 'agent'
                ? 'As an agent they keep the inbox only.'
                : 'As an owner they can do everything on the site, including managing its team.'}{' '}
              Their sessions end, so the new role applies when they sign in again.
              {you(pending.member) && ' That includes your own sessions: you will be asked to sign in again.'}
              {pending.role === 'agent' && owners === 1 && ' They are the only owner: the service refuses until another member is owner.'}
            </p>
          )}
          {pending.kind === 'remove' && (
            <p>
              They lose access to this site and every session of their account ends. Their account stays (and their other sites).
              {you(pending.member) && ' You are removing yourself.'}
            </p>
          )}
          {pending.kind === 'sessions' && <p>Every browser they are signed in with is signed out. They can sign in again with their password.</p>}
        </ConfirmDialog>
      )}
    </section>
  );
}
