const LOCAL = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * What a person typed, as the origin browsers send (`https://host[:port]`), or why it is not one.
 * The same rules as the server's `normaliseOrigin` (server/access/service.ts; a unit test holds the
 * two together), checked first so a typo is explained beside the field before any request.
 */
export function parseOrigin(input: string): { origin: string } | { problem: string } {
  const text = input.trim();
  if (!text || text.length > 300) return { problem: 'An origin is 1 to 300 characters, such as https://shop.example.' };
  if (text.includes('*')) return { problem: 'Wildcards are not allowed: list each origin (https://shop.example, https://www.shop.example).' };
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return { problem: 'Start with https:// — for example https://shop.example.' };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { problem: 'Write it as https://host or https://host:port.' };
  }
  if (url.username || url.password) return { problem: 'No user name or password in an origin.' };
  if (url.search || url.hash || !/^[a-z][a-z0-9+.-]*:\/\/[^/?#]+\/?$/i.test(text)) return { problem: `An origin has no path: use ${url.origin}.` };
  if (url.protocol === 'http:' && !LOCAL.has(url.hostname)) return { problem: 'Use https://: http:// is only for localhost, 127.0.0.1 and [::1].' };
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { problem: 'Only https:// origins (http:// for localhost only).' };
  return { origin: url.origin };
}
