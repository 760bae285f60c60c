/**
 * Just enough of Content Security Policy Level 3 to tell an owner whether a page's policy lets the
 * chat window's loader script run and its panel frame load: the directive that governs each
 * (with its fallbacks), and source-list matching (keywords, nonces, schemes, hosts with wildcards,
 * ports and paths). Hashes are not judged: an external script can match one only through its
 * `integrity` attribute, which the snippet does not carry.
 */

/** One policy: directive name (lower case) to its source expressions, first occurrence wins (as browsers do). */
export interface Policy {
  /** Where the policy came from, for messages: `header` or `meta`. */
  from: 'header' | 'meta';
  text: string;
  directives: Map<string, string[]>;
}

/** What the check asks a policy about. */
export type Fetch = 'script' | 'frame';

/** Which directives govern a fetch, most specific first (CSP3 "effective directive" and its fallback list). */
const FALLBACKS: Record<Fetch, string[]> = {
  script: ['script-src-elem', 'script-src', 'default-src'],
  frame: ['frame-src', 'child-src', 'default-src'],
};

/**
 * The policies of one header value or meta content: a comma separates policies (several header
 * fields are joined with commas), a semicolon directives. Empty policies are dropped.
 */
export function parsePolicies(value: string, from: Policy['from']): Policy[] {
  const policies: Policy[] = [];
  for (const text of value.split(',')) {
    const directives = new Map<string, string[]>();
    for (const part of text.split(';')) {
      const tokens = part
        .trim()
        .split(/[\t\n\f\r ]+/)
        .filter(Boolean);
      if (tokens.length === 0) continue;
      const name = tokens[0].toLowerCase();
      if (!/^[a-z0-9-]+$/.test(name) || directives.has(name)) continue;
      directives.set(name, tokens.slice(1));
    }
    if (directives.size > 0) policies.push({ from, text: text.trim(), directives });
  }
  return policies;
}

/** The verdict of one policy for one fetch: the directive that decided, or null when none applies. */
export interface Verdict {
  allowed: boolean;
  directive: string | null;
}

const DEFAULT_PORT: Record<string, string> = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443' };
const portOf = (url: URL) => url.port || DEFAULT_PORT[url.protocol] || '';

/** `source` scheme matches `url` scheme, allowing the secure upgrade (http→https, ws→wss). */
function schemeMatches(source: string, url: string): boolean {
  return source === url || (source === 'http:' && url === 'https:') || (source === 'ws:' && url === 'wss:');
}

const HOST_SOURCE = /^(?:([a-z][a-z0-9+.-]*):\/\/)?(\*|(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::(\d{1,5}|\*))?(\/[^]*)?$/i;

function hostSourceMatches(expression: string, url: URL, page: URL): boolean {
  const m = HOST_SOURCE.exec(expression);
  if (!m) return false;
  const [, scheme, host, port, path] = m;
  if (scheme) {
    if (!schemeMatches(`${scheme.toLowerCase()}:`, url.protocol)) return false;
  } else if (!schemeMatches(page.protocol, url.protocol)) return false;
  const h = host.toLowerCase();
  const urlHost = url.hostname.toLowerCase();
  if (h.startsWith('*.')) {
    if (!urlHost.endsWith(h.slice(1))) return false;
  } else if (h !== '*' && h !== urlHost) return false;
  if (port === '*') {
    // any port
  } else if (port) {
    if (port !== portOf(url) && !(port === '80' && url.protocol === 'https:' && portOf(url) === '443')) return false;
  } else if (portOf(url) !== DEFAULT_PORT[url.protocol]) return false;
  if (path && path !== '/') {
    let decoded: string;
    let urlPath: string;
    try {
      decoded = decodeURIComponent(path);
      urlPath = decodeURIComponent(url.pathname);
    } catch {
      return false;
    }
    if (decoded.endsWith('/') ? !urlPath.startsWith(decoded) : urlPath !== decoded) return false;
  }
  return true;
}

/** `'self'`: the page's own origin, or its secure upgrade on the same host. */
function selfMatches(url: URL, page: URL): boolean {
  if (url.origin === page.origin) return true;
  if (url.hostname.toLowerCase() !== page.hostname.toLowerCase() || !schemeMatches(page.protocol, url.protocol)) return false;
  return portOf(url) === portOf(page) || (portOf(url) === DEFAULT_PORT[url.protocol] && portOf(page) === DEFAULT_PORT[page.protocol]);
}

/**
 * Does a source list let `url` load as this fetch on `page`? `nonce` is the element's nonce
 * attribute (scripts). With `'strict-dynamic'` a parser-inserted script needs a nonce: host, scheme
 * and `'self'` expressions are ignored (CSP3 §8.2).
 */
export function sourceListAllows(sources: string[], fetch: Fetch, url: URL, page: URL, nonce?: string): boolean {
  const lower = sources.map((s) => s.toLowerCase());
  if (lower.length === 0 || (lower.length === 1 && lower[0] === "'none'")) return false;
  if (fetch === 'script' && nonce) {
    for (const s of sources) {
      const m = /^'nonce-([A-Za-z0-9+/_=-]+)'$/i.exec(s);
      if (m && m[1] === nonce) return true;
    }
  }
  if (fetch === 'script' && lower.includes("'strict-dynamic'")) return false;
  for (const s of lower) {
    if (s === '*') {
      if (['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol) || url.protocol === page.protocol) return true;
      continue;
    }
    if (s === "'self'") {
      if (selfMatches(url, page)) return true;
      continue;
    }
    if (s.startsWith("'")) continue; // other keywords, nonces and hashes
    if (/^[a-z][a-z0-9+.-]*:$/.test(s)) {
      if (schemeMatches(s, url.protocol)) return true;
      continue;
    }
    if (hostSourceMatches(s, url, page)) return true;
  }
  return false;
}

/** One policy's verdict for loading `url` as a script or a frame on `page`. */
export function policyAllows(policy: Policy, fetch: Fetch, url: URL, page: URL, nonce?: string): Verdict {
  for (const name of FALLBACKS[fetch]) {
    const sources = policy.directives.get(name);
    if (sources) return { allowed: sourceListAllows(sources, fetch, url, page, nonce), directive: name };
  }
  return { allowed: true, directive: null };
}

/** The first of `policies` that refuses the fetch (every enforced policy must allow it), or null. */
export function firstRefusal(policies: Policy[], fetch: Fetch, url: URL, page: URL, nonce?: string): { policy: Policy; directive: string } | null {
  for (const policy of policies) {
    const v = policyAllows(policy, fetch, url, page, nonce);
    if (!v.allowed) return { policy, directive: v.directive! };
  }
  return null;
}
