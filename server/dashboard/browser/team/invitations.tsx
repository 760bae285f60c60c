import { useState } from 'preact/hooks';
import { call, callPage, client, type Role, type Schemas } from '../api';
import { Button } from '../components/Button';
import { Field, TextInput } from '../components/Field';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { ShownOnce } from '../components/ShownOnce';
import { Table } from '../components/Table';
import { useAction } from '../use-action';
import { usePagedList } from '../use-paged-list';
import { LoadMore } from '../components/LoadMore';

type Pending = Schemas['PendingInvitation'];

/** Invite by email and role (the link is shown once), and the pending invitations, withdrawable. */
export function Invitations({ siteId, onChange }: { siteId: string; onChange: () => void }) {
  const [link, setLink] = useState<{ email: string; url: string } | null>(null);
  const [withdrawing, setWithdrawing] = useState<Pending | null>(null);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('agent');

  const list = usePagedList(
    (cursor) =>
      callPage(() => client.GET('/sites/{siteId}/invitations', { params: { path: { siteId }, query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
    [siteId],
  );
  const { items: pending, error } = list;

  const invite = useAction(async () => {
    const inv = await call(() => client.POST('/sites/{siteId}/invitations', { params: { path: { siteId } }, body: { email: email.trim(), role } }));
    setLink({ email: inv.email, url: inv.url });
    setEmail('');
    onChange();
    await list.reload(); // newest first: the new one on top
  });

  return (
    <section class="card stack" aria-labelledby="invitations-title">
      <h2 id="invitations-title">Invitations</h2>
      {link && (
        <div class="stack">
          <ShownOnce label="Invitation link" value={link.url} onDone={() => setLink(null)} />
          <p class="hint">
            Send it to {link.email} yourself (the service sends no email). It works once, for 7 days, for that email only; whoever has the link can accept it
            with that email, so send it privately.
          </p>
        </div>
      )}
      <form class="stack" onSubmit={invite.submit} aria-labelledby="invite-title">
        <h3 id="invite-title">Invite someone</h3>
        <ErrorBanner error={invite.error} />
        <div class="invite-row">
          <TextInput label="Email" type="email" value={email} onValue={setEmail} required maxLength={254} autocomplete="off" />
          <Field label="Role">
            {({ id, describedBy }) => (
              <select id={id} aria-describedby={describedBy} value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
                <option value="agent">Agent: the inbox</option>
                <option value="owner">Owner: everything</option>
              </select>
            )}
          </Field>
        </div>
        <div>
          <Button variant="primary" submit busy={invite.busy}>
            Create invitation
          </Button>
        </div>
      </form>
      <ErrorBanner error={error} />
      {pending === null ? (
        !error && <p class="loading">Loading invitations…</p>
      ) : (
        <Table
          caption="Pending invitations"
          rows={pending}
          rowKey={(i) => i.id}
          empty={<EmptyState title="No pending invitations.">An invitation is listed here until it is accepted, withdrawn or expires.</EmptyState>}
          columns={[
            { header: 'Email', cell: (i) => i.email },
            { header: 'Role', cell: (i) => i.role },
            { header: 'Invited', cell: (i) => <RelativeTime at={i.createdAt} />, class: 'nowrap' },
            { header: 'Expires', cell: (i) => <RelativeTime at={i.expiresAt} />, class: 'nowrap' },
            {
              header: 'Withdraw',
              cell: (i) => (
                <Button variant="danger" onClick={() => setWithdrawing(i)} aria-label={`Withdraw the invitation of ${i.email}`}>
                  Withdraw
                </Button>
              ),
            },
          ]}
        />
      )}
      <LoadMore list={list} label="Show more invitations" />
      {withdrawing && (
        <ConfirmDialog
          title={`Withdraw the invitation of ${withdrawing.email}?`}
          confirm="Withdraw invitation"
          danger
          onCancel={() => setWithdrawing(null)}
          onConfirm={async () => {
            await call(() => client.DELETE('/sites/{siteId}/invitations/{invitationId}', { params: { path: { siteId, invitationId: withdrawing.id } } }));
            list.update((before) => before.filter((i) => i.id !== withdrawing.id));
            setWithdrawing(null);
            onChange();
          }}
        >
          <p>Its link stops working at once. You can invite {withdrawing.email} again later.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
