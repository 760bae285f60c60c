/**
 * Client-side routing by the history API: every path under /dashboard/ is served the same shell
 * (server/dashboard/routes.ts), and this module says which page it is. `navigate` for code,
 * `<Link>` (components/Link.tsx) for anchors; both leave the page without a reload.
 */
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/dashboard';
const CHANGED = 'dashboard:navigate';

/** The path below /dashboard, always starting with `/` (`/` for the dashboard itself). */
export function currentPath(): string {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return p === '' ? '/' : p;
}

/** Goes to a path below /dashboard (`/sites/ws_.../keys`); `replace` keeps the history entry. */
export function navigate(path: string, replace = false): void {
  const url = `${BASE}${path}`;
  if (url === location.pathname + location.search + location.hash) return;
  history[replace ? 'replaceState' : 'pushState'](null, '', url);
  dispatchEvent(new Event(CHANGED));
}

/** The current path, re-rendering on navigation (links, code, back and forward). */
export function usePath(): string {
  const [path, setPath] = useState(currentPath);
  useEffect(() => {
    const update = () => setPath(currentPath());
    addEventListener('popstate', update);
    addEventListener(CHANGED, update);
    return () => {
      removeEventListener('popstate', update);
      removeEventListener(CHANGED, update);
    };
  }, []);
  return path;
}

/** `/sites/<siteId>/<page>` split into its parts; undefined for other paths. */
export function matchSitePath(path: string): { siteId: string; page: string } | undefined {
  const m = /^\/sites\/(ws_[0-9a-z]{26})(?:\/([a-z-]+))?\/?$/.exec(path);
  return m ? { siteId: m[1], page: m[2] ?? '' } : undefined;
}
