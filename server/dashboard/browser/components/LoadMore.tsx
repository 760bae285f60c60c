import type { PagedList } from '../use-paged-list';
import { Button } from './Button';

/** The "load more" button under a paged list (use-paged-list.ts): shown while more pages follow, busy while one is read. */
export function LoadMore({ list, label }: { list: Pick<PagedList<unknown>, 'hasMore' | 'loading' | 'more'>; label: string }) {
  if (!list.hasMore) return null;
  return (
    <div>
      <Button busy={list.loading} onClick={list.more}>
        {label}
      </Button>
    </div>
  );
}
