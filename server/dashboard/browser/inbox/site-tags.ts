/**
 * The site's tags as the inbox's pickers and tag filter show them: read once while the inbox is
 * open, then kept by the live stream (`tag.created`, `tag.renamed`, `tag.deleted`), so an owner's
 * change shows in every open inbox without a reload. Dropped when no picker watches, since events
 * are not followed then; read again after a resync.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, client } from '../api';
import { onResync, subscribeInbox } from '../live/inbox-stream';
import { tagsAfter, type Tag } from './model';

interface Watched {
  tags: Promise<Tag[]> | null;
  views: Set<() => void>;
  off: () => void;
}
const sites = new Map<string, Watched>();

function changed(w: Watched) {
  for (const view of w.views) view();
}

/** Reads the site's tags again at the next look (settings/tags.tsx after an owner's change, a resync). */
export function forgetSiteTags(siteId: string) {
  const w = sites.get(siteId);
  if (!w) return;
  w.tags = null;
  changed(w);
}

function tagsOf(w: Watched, siteId: string): Promise<Tag[]> {
  if (!w.tags) {
    const read = call(() => client.GET('/sites/{siteId}/tags', { params: { path: { siteId } } }));
    read.catch(() => w.tags === read && (w.tags = null));
    w.tags = read;
  }
  return w.tags;
}

function watch(siteId: string, view: () => void): () => void {
  let w = sites.get(siteId);
  if (!w) {
    const watched: Watched = { tags: null, views: new Set(), off: () => undefined };
    const offEvents = subscribeInbox(siteId, (e) => {
      if (!watched.tags || !e.name.startsWith('tag.')) return;
      watched.tags = watched.tags.then((tags) => tagsAfter(tags, e, true));
      changed(watched);
    });
    const offResync = onResync(siteId, () => forgetSiteTags(siteId));
    watched.off = () => {
      offEvents();
      offResync();
    };
    sites.set(siteId, (w = watched));
  }
  w.views.add(view);
  const mine = w;
  return () => {
    mine.views.delete(view);
    if (mine.views.size) return;
    mine.off();
    sites.delete(siteId);
  };
}

/** The site's tags, following live changes: null until read; `error` when the read failed. */
export function useSiteTags(siteId: string): { tags: Tag[] | null; error: unknown } {
  const [state, setState] = useState<{ tags: Tag[] | null; error: unknown }>({ tags: null, error: null });
  useEffect(() => {
    let current = true;
    const look = () => {
      const w = sites.get(siteId);
      if (!w) return;
      const read = tagsOf(w, siteId);
      read.then(
        (tags) => current && w.tags === read && setState({ tags, error: null }),
        (error) => current && setState({ tags: null, error }),
      );
    };
    const off = watch(siteId, look);
    look();
    return () => {
      current = false;
      off();
    };
  }, [siteId]);
  return state;
}
