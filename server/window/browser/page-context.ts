/**
 * The host page's side of the visitor's context (docs/window.md, "What the window collects"), part
 * of the loader. The loader tells the panel which page it is on (address, title, referrer) when
 * the panel loads and when the address changes without a page load (a single-page app's
 * navigation); the panel decides what leaves the browser. While the visitor has an open
 * conversation the panel says so, and the loader remembers it in the page origin's localStorage
 * (`cw:<site>:active`, a time, nothing about the visitor), so the next page of the site loads the
 * panel at once: it reports that page, and replies and unread counts arrive without a click.
 * Nothing is watched, and nothing is remembered, while there is no open conversation or the site
 * tracks no pages.
 */

export interface HostPage {
  url: string;
  title: string;
  referrer: string;
}

/** How long "a conversation is open" is trusted without the panel confirming it. */
const ACTIVE_FOR_MS = 24 * 3600_000;
/** How often the address is compared while watching (pushState fires no event). */
const CHECK_EVERY_MS = 1000;

export const currentPage = (): HostPage => ({ url: location.href, title: document.title, referrer: document.referrer });

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null; // refused (privacy settings): the panel loads on the first click, as without this
  }
}

export function createPageWatch(opts: { siteId: string; send(page: HostPage): void; loadPanel(): void }) {
  const key = `cw:${opts.siteId}:active`;
  let timer: ReturnType<typeof setInterval> | undefined;
  let last = location.href;

  const check = () => {
    if (location.href === last) return;
    last = location.href;
    // A moment for the app to set the new page's title.
    setTimeout(() => opts.send(currentPage()), 300);
  };

  function watch(on: boolean) {
    if (on === (timer !== undefined)) return;
    if (on) {
      last = location.href;
      timer = setInterval(check, CHECK_EVERY_MS);
      addEventListener('popstate', check);
      addEventListener('hashchange', check);
    } else {
      clearInterval(timer);
      timer = undefined;
      removeEventListener('popstate', check);
      removeEventListener('hashchange', check);
    }
  }

  return {
    /** At the loader's start: a conversation open on an earlier page loads the panel now. */
    start() {
      try {
        const until = Number(storage()?.getItem(key));
        if (until > Date.now()) opts.loadPanel();
        else if (until) storage()?.removeItem(key);
      } catch {
        // storage refused: nothing remembered
      }
    },
    /** The panel's word: whether the visitor's conversation is open, and whether the site tracks pages. */
    active(open: boolean, tracking: boolean) {
      try {
        if (open) storage()?.setItem(key, String(Date.now() + ACTIVE_FOR_MS));
        else storage()?.removeItem(key);
      } catch {
        // storage refused or full: the next page loads the panel on a click
      }
      watch(open && tracking);
    },
  };
}
