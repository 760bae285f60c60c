import { callPage, client, type Me, type Schemas } from '../api';
import { Button } from '../components/Button';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { Table } from '../components/Table';
import { LoadMore } from '../components/LoadMore';
import { usePagedList } from '../use-paged-list';

type Entry = Schemas['AuditEntry'];

/**
 * The site's audit log, newest first, 50 entries a page (keyset: "Show older" follows the cursor).
 * Read again from the top whenever `version` moves (a change made on this page).
 */
export function AuditLog({ siteId, me, version }: { siteId: string; me: Me; version: number }) {
  const list = usePagedList(
    (cursor) => callPage(() => client.GET('/sites/{siteId}/audit-log', { params: { path: { siteId }, query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
    [siteId, version],
  );
  const { items: entries, error, loading: busy } = list;

  // Emails come with each entry, former members' too; an account id stands in only where none is known.
  const who = (id: string | null, email: string | null) =>
    id === null ? 'unknown account' : id === me.account.id ? `${me.account.email} (you)` : (email ?? id);
  const actor = (e: Entry) =>
    e.actor.type === 'operator'
      ? 'operator (CLI)'
      : e.actor.type === 'token'
        ? `${who(e.actor.accountId, e.actor.email)}, by token ${e.actor.tokenId ?? ''}`
        : who(e.actor.accountId, e.actor.email);
  const object = (e: Entry) => {
    if (!e.objectId) return <span class="muted">—</span>;
    return e.objectEmail ? <span title={e.objectId}>{e.objectEmail}</span> : <code>{e.objectId}</code>;
  };

  return (
    <section class="card stack" aria-labelledby="audit-title">
      <div class="line-row line-row-between">
        <h2 id="audit-title">Audit log</h2>
        <Button onClick={() => void list.reload()} busy={busy}>
          Refresh
        </Button>
      </div>
      <p class="hint">Who did what on this site, newest first; kept one year.</p>
      <ErrorBanner error={error} />
      {entries === null ? (
        !error && <p class="loading">Loading the audit log…</p>
      ) : (
        <Table
          caption="Audit log entries"
          rows={entries}
          rowKey={(e) => e.id}
          empty={<EmptyState title="Nothing recorded yet." />}
          columns={[
            { header: 'When', cell: (e) => <RelativeTime at={e.createdAt} />, class: 'nowrap' },
            { header: 'Who', cell: actor },
            { header: 'Action', cell: (e) => <code>{e.action}</code> },
            { header: 'Object', cell: object },
            { header: 'Address', cell: (e) => e.clientAddress ?? <span class="muted">—</span>, class: 'nowrap' },
          ]}
        />
      )}
      <LoadMore list={list} label="Show older entries" />
    </section>
  );
}
