/**
 * The one hook of the dashboard's keyset-paged lists (keys, invitations, the audit log, deliveries,
 * the security log, a conversation's timeline): the items so far, whether more follow, "load more"
 * from the cursor, loading and error, and a read from the top whenever `deps` change (a filter, a
 * version bumped by a change on the page) or `reload()` is called. Each read from the top starts a
 * new generation: an answer for filters changed meanwhile, or a "load more" that was overtaken by
 * a reload, is dropped, never shown. The items stay on screen while a reload is under way.
 */
import { useEffect, useRef, useState } from 'preact/hooks';

/** One page as `callPage` answers it (api.ts); a list may use a cursor of its own type. */
export interface Page<T, C = string> {
  items: T[];
  nextCursor: C | null;
}

export interface PagedList<T> {
  /** Null until the first page arrived. */
  items: T[] | null;
  /** The last read's failure, until the next read. */
  error: unknown;
  loading: boolean;
  hasMore: boolean;
  /** Reads the next page and appends it; nothing while a read is under way or at the end. */
  more(): void;
  /** Reads from the top again (after a change that may move rows); settles when it is shown. */
  reload(): Promise<void>;
  /** Changes the items in place: a row added, revoked or withdrawn here. */
  update(change: (items: T[]) => T[]): void;
}

export function usePagedList<T, C = string>(fetchPage: (cursor: C | null) => Promise<Page<T, C>>, deps: readonly unknown[]): PagedList<T> {
  const [items, setItems] = useState<T[] | null>(null);
  const [next, setNext] = useState<C | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);
  const generation = useRef(0);
  const busy = useRef(false);
  // The render's own fetch (it closes over the page's current filters).
  const latest = useRef(fetchPage);
  latest.current = fetchPage;

  const load = async (cursor: C | null) => {
    const mine = cursor === null ? ++generation.current : generation.current;
    busy.current = true;
    setLoading(true);
    setError(null);
    try {
      const page = await latest.current(cursor);
      if (mine !== generation.current) return;
      setItems((before) => (cursor !== null && before ? [...before, ...page.items] : page.items));
      setNext(page.nextCursor);
    } catch (err) {
      if (mine === generation.current) setError(err);
    } finally {
      if (mine === generation.current) {
        busy.current = false;
        setLoading(false);
      }
    }
  };

  useEffect(() => {
    void load(null);
  }, deps);

  return {
    items,
    error,
    loading,
    hasMore: next !== null,
    more: () => {
      if (next !== null && !busy.current) void load(next);
    },
    reload: () => load(null),
    update: (change) => setItems((before) => before && change(before)),
  };
}
