/**
 * The token of a one-time link (an invitation, the first-start setup link): in the fragment
 * (`#token=...`, which browsers never send to a server nor in Referer), or `?token=` from an older
 * link. Read once, then dropped from the address bar and the history, so it does not linger where
 * the page was.
 */
export function takeToken(): string {
  const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? new URLSearchParams(location.search).get('token') ?? '';
  if (location.hash || location.search) history.replaceState(null, '', location.pathname);
  return token;
}

/** What a link's token looks like (base62); anything else is a mangled link, told before any call. */
export const TOKEN_SHAPE = /^[0-9A-Za-z]{20,100}$/;
