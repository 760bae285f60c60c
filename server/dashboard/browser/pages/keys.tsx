/**
 * Access keys of the public API: list, create (the value shown once), revoke. The worked example
 * for pages: data through `call`/`callPage` (api.ts), a paged list through `usePagedList`, failures in an ErrorBanner, a form of Field
 * components, a ConfirmDialog before what cannot be undone, and a secret in ShownOnce.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, callPage, client, type Schemas } from '../api';
import type { PageProps } from '../types';
import { Button } from '../components/Button';
import { TextInput } from '../components/Field';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { EmptyState } from '../components/EmptyState';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { ShownOnce } from '../components/ShownOnce';
import { Table } from '../components/Table';
import { useAction } from '../use-action';
import { usePagedList } from '../use-paged-list';
import { LoadMore } from '../components/LoadMore';

type Key = Schemas['ApiKey'];
type Scope = Schemas['Scope'];

const RIGHTS: { scope: Scope; label: string }[] = [
  { scope: 'conversations:read', label: 'Read conversations' },
  { scope: 'conversations:write', label: 'Write conversations (start, reply, close)' },
  { scope: 'media:read', label: 'Read files' },
];

export function KeysPage({ site, me }: PageProps) {
  const [emails, setEmails] = useState<Map<string, string>>(new Map());
  const [created, setCreated] = useState<Schemas['CreatedApiKey'] | null>(null);
  const [revoking, setRevoking] = useState<Key | null>(null);
  const list = usePagedList(
    (cursor) =>
      callPage(() => client.GET('/sites/{siteId}/keys', { params: { path: { siteId: site.id }, query: { limit: 100, ...(cursor ? { cursor } : {}) } } })),
    [site.id],
  );
  const { items: keys, error } = list;

  useEffect(() => {
    // Who made each key: the members' emails (a failure here only leaves ids shown).
    call(() => client.GET('/sites/{siteId}/members', { params: { path: { siteId: site.id } } })).then(
      (members) => setEmails(new Map(members.map((m) => [m.accountId, m.email]))),
      () => undefined,
    );
  }, [site.id]);

  const madeBy = (k: Key) => (k.createdBy === null ? 'operator CLI' : k.createdBy === me.account.id ? 'you' : (emails.get(k.createdBy) ?? k.createdBy));

  return (
    <div class="stack">
      <ErrorBanner error={error} />
      {created && (
        <ShownOnce
          label="Access key"
          value={created.key}
          onDone={() => setCreated(null)} // dropped from memory: never shown again
        />
      )}
      <CreateKey
        siteId={site.id}
        onCreated={(k) => {
          setCreated(k);
          const { key: _value, ...listed } = k;
          list.update((before) => [...before, listed]);
        }}
      />
      {keys === null ? (
        !error && <p class="loading">Loading keys…</p>
      ) : (
        <Table
          caption="Access keys of the public API"
          rows={keys}
          rowKey={(k) => k.id}
          empty={<EmptyState title="No keys yet.">A key lets a script or an integration use the public API for this site.</EmptyState>}
          columns={[
            { header: 'Label', cell: (k) => k.label },
            { header: 'Prefix', cell: (k) => <code>{k.prefix}…</code>, class: 'nowrap' },
            { header: 'Rights', cell: (k) => k.scopes.join(', ') },
            { header: 'Created by', cell: madeBy },
            { header: 'Created', cell: (k) => <RelativeTime at={k.createdAt} />, class: 'nowrap' },
            { header: 'Last used', cell: (k) => <RelativeTime at={k.lastUsedAt} />, class: 'nowrap' },
            {
              header: 'Status',
              cell: (k) =>
                k.revokedAt ? (
                  <span class="tag tag-muted">
                    Revoked <RelativeTime at={k.revokedAt} />
                  </span>
                ) : (
                  <Button variant="danger" onClick={() => setRevoking(k)} aria-label={`Revoke ${k.label}`}>
                    Revoke
                  </Button>
                ),
            },
          ]}
        />
      )}
      <LoadMore list={list} label="Show more keys" />
      {revoking && (
        <ConfirmDialog
          title={`Revoke “${revoking.label}”?`}
          confirm="Revoke key"
          danger
          onCancel={() => setRevoking(null)}
          onConfirm={async () => {
            const revoked = await call(() => client.DELETE('/sites/{siteId}/keys/{keyId}', { params: { path: { siteId: site.id, keyId: revoking.id } } }));
            list.update((before) => before.map((k) => (k.id === revoked.id ? revoked : k)));
            setRevoking(null);
          }}
        >
          <p>
            The public API refuses <code>{revoking.prefix}…</code> from its next request on. Whatever uses it stops working. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function CreateKey({ siteId, onCreated }: { siteId: string; onCreated: (k: Schemas['CreatedApiKey']) => void }) {
  const [label, setLabel] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(['conversations:read', 'conversations:write']);
  const { busy, error, submit } = useAction(async () => {
    onCreated(await call(() => client.POST('/sites/{siteId}/keys', { params: { path: { siteId } }, body: { label, scopes } })));
    setLabel('');
  });
  const toggle = (scope: Scope, on: boolean) => setScopes((s) => (on ? [...s, scope] : s.filter((x) => x !== scope)));
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="create-key-title">
      <h2 id="create-key-title">New key</h2>
      <ErrorBanner error={error} />
      <TextInput label="Label" value={label} onValue={setLabel} required maxLength={100} hint="Who or what will use it, e.g. “Zapier”." />
      <fieldset class="checks">
        <legend>Rights</legend>
        {RIGHTS.map((r) => (
          <label key={r.scope} class="check">
            <input type="checkbox" checked={scopes.includes(r.scope)} onChange={(e) => toggle(r.scope, e.currentTarget.checked)} />
            <span>
              {r.label} <code>{r.scope}</code>
            </span>
          </label>
        ))}
      </fieldset>
      <div>
        <Button variant="primary" submit busy={busy} disabled={!scopes.length}>
          Create key
        </Button>
      </div>
    </form>
  );
}
