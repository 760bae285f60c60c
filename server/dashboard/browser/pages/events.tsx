/**
 * Events (owners): the event address, the delivery log and the signature checker, one view at a
 * time, the view kept in the address (`?view=deliveries`) so a reload or a shared link opens it.
 */
import { useState } from 'preact/hooks';
import type { PageProps } from '../types';
import { AddressView } from '../events/address';
import { DeliveriesView, type CheckRequest } from '../events/deliveries';
import { CheckerView } from '../events/checker';

const VIEWS = [
  { id: 'address', label: 'Address' },
  { id: 'deliveries', label: 'Delivery log' },
  { id: 'checker', label: 'Signature checker' },
] as const;
type View = (typeof VIEWS)[number]['id'];

const viewOf = (search: string): View => {
  const v = new URLSearchParams(search).get('view');
  return VIEWS.find((x) => x.id === v)?.id ?? 'address';
};

export function EventsPage({ site }: PageProps) {
  const [view, setView] = useState<View>(() => viewOf(location.search));
  const [check, setCheck] = useState<{ n: number; from: CheckRequest | null }>({ n: 0, from: null });
  const go = (v: View) => {
    setView(v);
    history.replaceState(history.state, '', v === 'address' ? location.pathname : `?view=${v}`);
  };
  return (
    <div class="stack">
      <nav aria-label="Events sections" class="subnav">
        <ul>
          {VIEWS.map((v) => (
            <li key={v.id}>
              <a
                href={v.id === 'address' ? location.pathname : `?view=${v.id}`}
                aria-current={view === v.id ? 'page' : undefined}
                onClick={(e) => {
                  e.preventDefault();
                  go(v.id);
                }}
              >
                {v.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      {view === 'address' && <AddressView siteId={site.id} />}
      {view === 'deliveries' && (
        <DeliveriesView
          siteId={site.id}
          onCheck={(from) => {
            setCheck((c) => ({ n: c.n + 1, from }));
            go('checker');
          }}
        />
      )}
      {view === 'checker' && <CheckerView key={check.n} from={check.from} />}
    </div>
  );
}
