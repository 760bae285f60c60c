/**
 * A page loaded on first visit (pages.ts): its module is fetched when it is first shown, once per
 * page load, and kept. A fetch that fails (offline, or a deploy removed the old build's chunks,
 * which are not kept) offers to try again or to reload, never a blank page.
 */
import type { FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Button } from './components/Button';

export function lazyPage<P extends object>(load: () => Promise<FunctionComponent<P>>): FunctionComponent<P> {
  let loaded: FunctionComponent<P> | undefined;
  let pending: Promise<FunctionComponent<P>> | undefined;
  return function LazyPage(props: P) {
    const [, setReady] = useState(0);
    const [failed, setFailed] = useState(false);
    const attempt = () => {
      setFailed(false);
      let live = true;
      (pending ??= load()).then(
        (component) => {
          loaded = component;
          if (live) setReady((n) => n + 1);
        },
        () => {
          pending = undefined;
          if (live) setFailed(true);
        },
      );
      return () => {
        live = false;
      };
    };
    useEffect(() => (loaded ? undefined : attempt()), []);
    if (loaded) {
      const Page = loaded;
      return <Page {...props} />;
    }
    if (failed)
      return (
        <div class="banner banner-error" role="alert">
          <p>This page could not be loaded. The connection may be down, or the dashboard was updated since this tab opened.</p>
          <Button onClick={() => attempt()}>Try again</Button> <Button onClick={() => location.reload()}>Reload the dashboard</Button>
        </div>
      );
    return (
      <p class="loading" role="status">
        Loading…
      </p>
    );
  };
}
