import { useState } from 'preact/hooks';
import { call, callPage, client } from '../api';
import { Button } from '../components/Button';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { Table } from '../components/Table';
import { LoadMore } from '../components/LoadMore';
import { usePagedList } from '../use-paged-list';
import { useAction } from '../use-action';

/**
 * The site's mail log (recipient, template, status, attempts, the relay's last complaint; no
 * bodies; 30 days) and a test email to the signed-in owner, which says where emails go.
 */
export function MailSettings({ siteId }: { siteId: string }) {
  const [version, setVersion] = useState(0);
  const [sent, setSent] = useState('');
  const list = usePagedList(
    (cursor) => callPage(() => client.GET('/sites/{siteId}/mail-log', { params: { path: { siteId }, query: { limit: 25, ...(cursor ? { cursor } : {}) } } })),
    [siteId, version],
  );
  const test = useAction(async () => {
    setSent('');
    const queued = await call(() => client.POST('/sites/{siteId}/mail-log/test', { params: { path: { siteId } } }));
    setSent(`A test email to ${queued.recipient} is queued; emails go to ${queued.destination}.`);
    setVersion((v) => v + 1);
  });
  const { items: emails, error, loading } = list;
  return (
    <section class="card stack" aria-labelledby="mail-title">
      <div class="line-row line-row-between">
        <h2 id="mail-title">Email</h2>
        <Button onClick={() => void list.reload()} busy={loading}>
          Refresh
        </Button>
      </div>
      <p class="hint">What the site sent or tries to send (invitations, notifications, test emails), newest first; kept 30 days, without bodies.</p>
      <div class="line-row">
        <Button onClick={() => void test.run()} busy={test.busy}>
          Send me a test email
        </Button>
        <span class="copy-status" role="status">
          {sent}
        </span>
      </div>
      <ErrorBanner error={test.error ?? error} />
      {emails === null ? (
        !error && <p class="loading">Loading the mail log…</p>
      ) : (
        <Table
          caption="Emails of this site"
          rows={emails}
          rowKey={(e) => e.id}
          empty={<EmptyState title="No email sent yet." />}
          columns={[
            { header: 'When', cell: (e) => <RelativeTime at={e.createdAt} />, class: 'nowrap' },
            { header: 'To', cell: (e) => e.recipient },
            { header: 'Email', cell: (e) => <code>{e.template}</code> },
            { header: 'Status', cell: (e) => e.status },
            { header: 'Attempts', cell: (e) => e.attempts, class: 'num' },
            { header: 'Last error', cell: (e) => e.lastError ?? <span class="muted">—</span> },
          ]}
        />
      )}
      <LoadMore list={list} label="Show older emails" />
    </section>
  );
}
