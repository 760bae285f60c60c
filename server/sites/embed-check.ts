/**
 * The embed check (docs/manage.md, "Checking the snippet on a page"): an owner names a page of the
 * site, the service fetches it and says whether the chat window's snippet is there and would work,
 * and if not, exactly why: the page not reachable (name, TLS, time limit, HTTP status, redirects),
 * the loader tag absent, inert or pointing at another site or another host, or the page's
 * Content-Security-Policy refusing the loader script or the panel frame.
 *
 * The fetch is a customer-chosen URL, so it is bounded every way: only the site's own allowed
 * origins (which also bounds it to the customer's site), the SSRF rules of event addresses, at most
 * three redirects each re-checked, one time limit, a byte limit, and a budget per site (the route).
 */
import tls from 'node:tls';
import type { IncomingHttpHeaders } from 'node:http';
import type { AccessService } from '../access/service';
import { invalid } from '../platform/errors';
import type { Resolver } from '../webhooks/ssrf';
import { embedSnippet } from './service';
import { fetchPage, FetchFailure, MAX_URL_CHARS, Redirect } from './page-fetch';
import { createHtmlScanner, Tag } from './html-scan';
import { firstRefusal, parsePolicies, Policy } from './csp';

export const EMBED_CHECK_LIMITS = {
  /** The whole check: every name resolution, connection, redirect and the body. */
  timeoutMs: 10_000,
  /** Body bytes read at most (after content decoding); reading stops earlier once the snippet is seen. */
  maxBytes: 2 * 1024 * 1024,
  maxRedirects: 3,
  /** Checks a minute per site (the route counts them on the shared limiter). */
  perSitePerMinute: 10,
  /** Checks a minute per account, over all its sites (sites are free to make). */
  perAccountPerMinute: 30,
} as const;

export type ProblemCode =
  | FetchFailure['code']
  | 'http_status'
  | 'not_html'
  | 'loader_missing'
  | 'loader_inert'
  | 'site_id_mismatch'
  | 'loader_wrong_host'
  | 'csp_blocks_script'
  | 'csp_blocks_frame';

export interface Problem {
  code: ProblemCode;
  message: string;
}

export interface EmbedCheckResult {
  url: string;
  finalUrl: string;
  status: number | null;
  /** The page answered 2xx with HTML and was read. */
  reachable: boolean;
  /** A loader tag with this site's id and this service's loader URL, which the browser runs, is on the page. */
  found: boolean;
  /** Found, and nothing the check can see stops the window (no problem at all). */
  ok: boolean;
  /** Some `<script>` loading `/window/v1/loader.js` is on the page (whatever its site or host). */
  loaderFound: boolean;
  /** Whether a loader tag names this site; null when there is none. */
  siteIdMatches: boolean | null;
  /** Whether a loader tag loads from this service's window URL; null when there is none. */
  loaderHostMatches: boolean | null;
  /** The loader tag judged (the matching one, else the first); null when there is none. */
  loader: { src: string; siteId: string | null } | null;
  redirects: Redirect[];
  bytesRead: number;
  truncated: boolean;
  durationMs: number;
  problems: Problem[];
}

export interface EmbedCheckOptions {
  access: AccessService;
  /** Where the loader is served (WINDOW_PUBLIC_URL, else PUBLIC_URL). */
  windowUrl: string;
  /** PUBLIC_URL: a loader pointing there while the window has its own origin is named as such. */
  publicUrl: string;
  allowPrivateNetworks: boolean;
  /** CAs trusted besides Node's roots (WEBHOOK_CA_FILE). */
  ca?: (string | Buffer)[];
  resolve?: Resolver;
  timeoutMs?: number;
  maxBytes?: number;
  now?: () => number;
}

/** The `type` values with which a `<script>` runs (HTML's JavaScript MIME type essences, `module`, empty). */
const RUNNABLE_TYPES = new Set([
  '',
  'module',
  'application/ecmascript',
  'application/javascript',
  'application/x-ecmascript',
  'application/x-javascript',
  'text/ecmascript',
  'text/javascript',
  'text/javascript1.0',
  'text/javascript1.1',
  'text/javascript1.2',
  'text/javascript1.3',
  'text/javascript1.4',
  'text/javascript1.5',
  'text/jscript',
  'text/livescript',
  'text/x-ecmascript',
  'text/x-javascript',
]);

const LOADER_PATH = '/window/v1/loader.js';

interface LoaderTag {
  src: URL;
  siteId: string | null;
  runs: boolean;
  type: string;
  nonce?: string;
}

const headerValues = (headers: IncomingHttpHeaders | null, name: string): string[] => {
  const v = headers?.[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
};

const kb = (n: number) => `${Math.round(n / 1024)} KB`;
const quote = (s: string, max = 300) => (s.length > max ? `${s.slice(0, max)}…` : s);

export function createEmbedCheck(opts: EmbedCheckOptions) {
  const now = opts.now ?? Date.now;
  const timeoutMs = opts.timeoutMs ?? EMBED_CHECK_LIMITS.timeoutMs;
  const maxBytes = opts.maxBytes ?? EMBED_CHECK_LIMITS.maxBytes;
  // Parsing the root store takes milliseconds: once per service, not per check.
  const secureContext = tls.createSecureContext(opts.ca?.length ? { ca: [...tls.rootCertificates, ...opts.ca] } : {});
  const windowOrigin = new URL(opts.windowUrl).origin;
  const publicOrigin = new URL(opts.publicUrl).origin;
  const userAgent = `chat-service-embed-check/1 (+${publicOrigin})`;

  /** The page URL an owner asked for, or 400 saying what is wrong with it. */
  function target(raw: string, allowedOrigins: string[]): URL {
    let url: URL;
    try {
      url = new URL(raw.trim());
    } catch {
      throw invalid(`"${quote(raw, 100)}" is not a URL; give a full address such as https://shop.example/.`, [{ path: '/body/url', message: 'not a URL' }]);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw invalid('Only http:// and https:// pages can be checked.', [{ path: '/body/url', message: 'not http(s)' }]);
    if (url.username || url.password)
      throw invalid('The URL must not carry a user name or password: the check never sends credentials.', [{ path: '/body/url', message: 'has credentials' }]);
    if (url.href.length > MAX_URL_CHARS)
      throw invalid(`The URL is longer than ${MAX_URL_CHARS} characters once normalised.`, [{ path: '/body/url', message: 'too long' }]);
    if (!allowedOrigins.includes(url.origin)) {
      const why =
        allowedOrigins.length === 0
          ? 'The site has no allowed origins yet, so the window shows nowhere.'
          : `${url.origin} is not among the site's allowed origins (${allowedOrigins.join(', ')}): the window would refuse to open on that page.`;
      throw invalid(`${why} Add the page's origin to the site's allowed origins first; the check fetches pages of those origins only.`, [
        { path: '/body/url', message: 'origin not allowed' },
      ]);
    }
    url.hash = '';
    return url;
  }

  function loaderOf(tag: Tag, base: URL): LoaderTag | null {
    const raw = tag.attrs.src;
    if (raw === undefined || raw.trim() === '') return null;
    let src: URL;
    try {
      src = new URL(raw.trim(), base);
    } catch {
      return null;
    }
    if (!src.pathname.endsWith(LOADER_PATH)) return null;
    const type = (tag.attrs.type ?? '').trim().toLowerCase();
    return { src, siteId: tag.attrs['data-site'] ?? null, runs: RUNNABLE_TYPES.has(type), type, nonce: tag.attrs.nonce };
  }

  const isRight = (t: LoaderTag, siteId: string) => t.siteId === siteId && t.src.origin === windowOrigin && t.src.pathname === LOADER_PATH;

  /** What is wrong with the loader tag that is on the page but not right. */
  function tagProblems(t: LoaderTag, siteId: string, scriptUrl: string): Problem[] {
    const problems: Problem[] = [];
    if (t.siteId === null || t.siteId === '')
      problems.push({ code: 'site_id_mismatch', message: `The loader tag has no data-site attribute; it needs data-site="${siteId}".` });
    else if (t.siteId !== siteId)
      problems.push({
        code: 'site_id_mismatch',
        message: `The loader tag names another site: data-site="${quote(t.siteId, 60)}" instead of "${siteId}" (a snippet copied from another site?).`,
      });
    if (t.src.origin !== windowOrigin || t.src.pathname !== LOADER_PATH) {
      const oldHost =
        t.src.origin === publicOrigin && publicOrigin !== windowOrigin
          ? ` ${publicOrigin} serves the API only; the window has its own origin (WINDOW_PUBLIC_URL), and the loader is not served on the API's host.`
          : '';
      problems.push({
        code: 'loader_wrong_host',
        message: `The loader is loaded from ${quote(t.src.href)}, but this service serves it at ${scriptUrl}.${oldHost} Paste the current snippet.`,
      });
    }
    if (!t.runs)
      problems.push({
        code: 'loader_inert',
        message: `The loader tag has type="${quote(t.type, 60)}", so the browser does not run it (a consent manager may switch it on after consent; then the window shows only to visitors who consent).`,
      });
    return problems;
  }

  return {
    async check(siteId: string, rawUrl: string, admit: () => Promise<void>): Promise<EmbedCheckResult> {
      const site = await opts.access.getSite(siteId);
      const allowedOrigins = site.allowedOrigins;
      const start = target(rawUrl, allowedOrigins);
      // Counted only once the request is sound: a typo costs nothing, every fetch counts.
      await admit();
      const began = now();
      const { scriptUrl } = embedSnippet(opts.windowUrl, siteId);
      const panelUrl = new URL(`${windowOrigin}/window/v1/sites/${siteId}/panel`);

      const scanner = createHtmlScanner();
      const tags: LoaderTag[] = [];
      const metaPolicies: Policy[] = [];
      let base: URL | null = null;
      let pageUrl = start;
      let notHtml: string | null = null;

      const fetched = await fetchPage(
        start,
        {
          allowPrivate: opts.allowPrivateNetworks,
          secureContext,
          resolve: opts.resolve,
          timeoutMs,
          maxBytes,
          maxRedirects: EMBED_CHECK_LIMITS.maxRedirects,
          userAgent,
          originAllowed: (origin) => allowedOrigins.includes(origin),
        },
        {
          wantsBody(status, headers, url) {
            pageUrl = url;
            if (status < 200 || status > 299) return false;
            const type = String(headers['content-type'] ?? '')
              .split(';')[0]
              .trim()
              .toLowerCase();
            if (type && type !== 'text/html' && type !== 'application/xhtml+xml') {
              notHtml = type;
              return false;
            }
            return true;
          },
          onText(chunk) {
            for (const tag of scanner.feed(chunk)) {
              if (tag.name === 'base' && base === null && tag.attrs.href !== undefined) {
                try {
                  base = new URL(tag.attrs.href, pageUrl);
                } catch {
                  // an unusable base leaves the page's URL as the base, as in browsers
                }
              } else if (tag.name === 'meta' && (tag.attrs['http-equiv'] ?? '').trim().toLowerCase() === 'content-security-policy') {
                metaPolicies.push(...parsePolicies(tag.attrs.content ?? '', 'meta'));
              } else if (tag.name === 'script') {
                const loader = loaderOf(tag, base ?? pageUrl);
                if (loader) tags.push(loader);
                if (loader && loader.runs && isRight(loader, siteId)) return true; // found: read no further
              }
            }
            return false;
          },
        },
      );

      const problems: Problem[] = [];
      const reachable = fetched.failure === null && fetched.status !== null && fetched.status >= 200 && fetched.status <= 299 && notHtml === null;
      if (fetched.failure) problems.push(fetched.failure);
      else if (fetched.status !== null && (fetched.status < 200 || fetched.status > 299)) {
        const redirectWithout = fetched.status >= 300 && fetched.status < 400 ? ' (a redirect without a Location header)' : '';
        problems.push({ code: 'http_status', message: `${fetched.finalUrl} answered HTTP ${fetched.status}${redirectWithout}; the page must answer 200.` });
      } else if (notHtml !== null) {
        problems.push({ code: 'not_html', message: `${fetched.finalUrl} is ${notHtml}, not an HTML page.` });
      }

      const right = tags.find((t) => t.runs && isRight(t, siteId));
      const judged = right ?? tags.find((t) => t.siteId === siteId) ?? tags[0] ?? null;
      const found = right !== undefined;
      // A page that was read (fully, to the limit, or until a time limit cut it) can still say what it holds.
      const read = fetched.bytesRead > 0 || reachable;
      if (!found && read) {
        if (judged) problems.push(...tagProblems(judged, siteId, scriptUrl));
        else if (reachable) {
          const where = fetched.truncated ? `in the first ${kb(fetched.bytesRead)} of the page (the check reads no more)` : 'in the page';
          problems.push({
            code: 'loader_missing',
            message: `No <script> loading ${LOADER_PATH} was found ${where}. Paste the snippet into the page's HTML; a tag added later by JavaScript (a tag manager) cannot be seen by this check.`,
          });
        }
      }

      if (reachable) {
        const policies = [...headerValues(fetched.headers, 'content-security-policy').flatMap((v) => parsePolicies(v, 'header')), ...metaPolicies];
        const scriptRefusal = firstRefusal(policies, 'script', judged?.src ?? new URL(scriptUrl), pageUrl, judged?.nonce);
        if (scriptRefusal)
          problems.push({
            code: 'csp_blocks_script',
            message: `The page's Content-Security-Policy (${scriptRefusal.policy.from === 'meta' ? '<meta> tag' : 'header'}) refuses the loader script: its ${scriptRefusal.directive} does not allow ${windowOrigin}. Add ${windowOrigin} to ${scriptRefusal.directive === 'default-src' ? 'script-src' : scriptRefusal.directive}. Policy: ${quote(scriptRefusal.policy.text)}`,
          });
        const frameRefusal = firstRefusal(policies, 'frame', panelUrl, pageUrl);
        if (frameRefusal)
          problems.push({
            code: 'csp_blocks_frame',
            message: `The page's Content-Security-Policy (${frameRefusal.policy.from === 'meta' ? '<meta> tag' : 'header'}) refuses the chat panel's frame: its ${frameRefusal.directive} does not allow ${windowOrigin}. Add ${windowOrigin} to ${frameRefusal.directive === 'child-src' ? 'child-src (or frame-src)' : 'frame-src'}. Policy: ${quote(frameRefusal.policy.text)}`,
          });
      }

      return {
        url: start.href,
        finalUrl: fetched.finalUrl,
        status: fetched.status,
        reachable,
        found,
        ok: found && problems.length === 0,
        loaderFound: tags.length > 0,
        siteIdMatches: tags.length > 0 ? tags.some((t) => t.siteId === siteId) : null,
        loaderHostMatches: tags.length > 0 ? tags.some((t) => t.src.origin === windowOrigin && t.src.pathname === LOADER_PATH) : null,
        // As the page has them, bounded: a page can put anything in an attribute.
        loader: judged ? { src: quote(judged.src.href, 2000), siteId: judged.siteId === null ? null : quote(judged.siteId, 200) } : null,
        redirects: fetched.redirects,
        bytesRead: fetched.bytesRead,
        truncated: fetched.truncated,
        durationMs: Math.max(0, now() - began),
        problems,
      };
    },
  };
}

export type EmbedCheck = ReturnType<typeof createEmbedCheck>;
