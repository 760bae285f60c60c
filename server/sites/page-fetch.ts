/**
 * A GET of a page of a customer's site, for the embed check, under the rules of event deliveries
 * (docs/operations.md, Event receivers): every host is resolved and refused when any of its IPs is
 * in a blocked range (server/webhooks/ssrf.ts), the connection goes to the checked IPs only
 * (pinnedLookup), TLS is verified. Besides: http and https only, redirects followed by hand and
 * each re-checked (origin allowed by the caller, SSRF again), one time limit for everything, and
 * the body read only while the caller wants more and up to a byte limit. Nothing of ours is sent:
 * no cookie, no credential, a plain User-Agent.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { pipeline } from 'node:stream';
import type { Readable } from 'node:stream';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { pinnedLookup } from '../webhooks/agents';
import { describeError } from '../webhooks/transport';
import { BlockedIpError, DnsTimeoutError, hostOf, resolveChecked, Resolver } from '../webhooks/ssrf';

export interface PageFetchOptions {
  allowPrivate: boolean;
  /** Built once by the caller: Node's roots plus WEBHOOK_CA_FILE's CAs. */
  secureContext: tls.SecureContext;
  resolve?: Resolver;
  timeoutMs: number;
  maxBytes: number;
  maxRedirects: number;
  userAgent: string;
  /** May a redirect go to this origin? (The first URL is the caller's to check.) */
  originAllowed(origin: string): boolean;
}

/** Why a page could not be read; the codes are the embed check's problem codes. */
export interface FetchFailure {
  code:
    | 'blocked_address'
    | 'dns_failed'
    | 'connection_failed'
    | 'tls_failed'
    | 'timeout'
    | 'too_many_redirects'
    | 'redirect_loop'
    | 'redirect_invalid'
    | 'origin_not_allowed'
    | 'unreadable';
  message: string;
}

export interface Redirect {
  url: string;
  status: number;
  location: string;
}

export interface PageFetchResult {
  /** The last URL asked for (the first one when there was no redirect). */
  finalUrl: string;
  /** The last answer's status; null when none arrived. */
  status: number | null;
  headers: IncomingHttpHeaders | null;
  redirects: Redirect[];
  /** Bytes of body handed to `onText` (after content decoding). */
  bytesRead: number;
  /** Reading stopped at `maxBytes` before the body ended. */
  truncated: boolean;
  failure: FetchFailure | null;
}

export interface PageReader {
  /** The final answer (from `url`) arrived: read its body? */
  wantsBody(status: number, headers: IncomingHttpHeaders, url: URL): boolean;
  /** More of the body; return true once nothing more is needed (reading stops). */
  onText(text: string): boolean;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** The longest URL the check fetches (as the request's `url`, after normalisation). */
export const MAX_URL_CHARS = 2048;

class Timeout extends Error {}

function decoderFor(encoding: string | undefined): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | null | 'unknown' {
  const e = (encoding ?? '').trim().toLowerCase();
  if (e === '' || e === 'identity') return null;
  if (e === 'gzip' || e === 'x-gzip') return zlib.createGunzip();
  if (e === 'deflate') return zlib.createInflate();
  if (e === 'br') return zlib.createBrotliDecompress();
  return 'unknown';
}

/** What a transport error means for the owner, as a failure of the check. */
function failureOf(err: unknown, url: URL, timeoutMs: number): FetchFailure {
  const host = url.host;
  if (err instanceof Timeout) return { code: 'timeout', message: `${url.href} did not answer in full within ${timeoutMs / 1000} s.` };
  if (err instanceof BlockedIpError)
    return {
      code: 'blocked_address',
      message: `${hostOf(url)} resolves to a loopback, private, link-local or otherwise reserved IP; the service does not fetch pages there (the same rule as for event addresses), so it cannot check this page.`,
    };
  if (err instanceof DnsTimeoutError) return { code: 'dns_failed', message: `${hostOf(url)}: the DNS servers did not answer in time.` };
  const text = describeError(err);
  if (text === 'name not resolved') return { code: 'dns_failed', message: `${hostOf(url)} does not resolve (no such name in DNS).` };
  if (text === 'certificate rejected')
    return {
      code: 'tls_failed',
      message: `${host}'s certificate was rejected (${(err as { code?: string }).code ?? 'invalid'}): browsers will refuse the page too.`,
    };
  if (text === 'tls handshake failed') return { code: 'tls_failed', message: `The TLS handshake with ${host} failed.` };
  return { code: 'connection_failed', message: `Could not fetch ${url.href}: ${text}.` };
}

/** One GET, answered up to its headers; the response is left unread. */
function get(url: URL, opts: PageFetchOptions, signal: AbortSignal): Promise<{ req: http.ClientRequest; res: IncomingMessage }> {
  const hostname = hostOf(url);
  const aborted = new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(new Timeout());
    signal.addEventListener('abort', () => reject(new Timeout()), { once: true });
  });
  aborted.catch(() => undefined);
  return Promise.race([resolveChecked(hostname, { allowPrivate: opts.allowPrivate, resolve: opts.resolve }), aborted]).then(
    (resolvedIps) =>
      new Promise((resolve, reject) => {
        const common = {
          method: 'GET',
          host: hostname,
          port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
          path: url.pathname + url.search,
          headers: {
            'User-Agent': opts.userAgent,
            Accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.1',
            'Accept-Encoding': 'gzip, deflate, br',
          },
          agent: false as const, // one connection per check, never shared with anything else
          lookup: pinnedLookup(resolvedIps),
        };
        const answered = (res: IncomingMessage) => {
          // Cutting a download short errors the response; its readers handle that, this keeps an unread one quiet.
          res.on('error', () => undefined);
          resolve({ req, res });
        };
        const req =
          url.protocol === 'https:'
            ? https.request({ ...common, secureContext: opts.secureContext, rejectUnauthorized: true } as https.RequestOptions, answered)
            : http.request(common, answered);
        const onAbort = () => req.destroy(new Timeout());
        signal.addEventListener('abort', onAbort, { once: true });
        req.on('close', () => signal.removeEventListener('abort', onAbort));
        req.on('error', reject);
        req.end();
      }),
  );
}

/**
 * Fetches `start` (its origin and form already checked by the caller) and feeds the final page's
 * body to `reader`. Never throws for what the network does: every outcome is a result.
 */
export async function fetchPage(start: URL, opts: PageFetchOptions, reader: PageReader): Promise<PageFetchResult> {
  const result: PageFetchResult = { finalUrl: start.href, status: null, headers: null, redirects: [], bytesRead: 0, truncated: false, failure: null };
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), opts.timeoutMs);
  const seen = new Set<string>([start.href]);
  let url = start;
  let current: http.ClientRequest | undefined;
  try {
    for (;;) {
      result.finalUrl = url.href;
      const { req, res } = await get(url, opts, controller.signal);
      current = req;
      result.status = res.statusCode ?? null;
      result.headers = res.headers;
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode ?? 0) && location) {
        req.destroy(); // the redirect's body is not needed
        result.redirects.push({ url: url.href, status: res.statusCode!, location });
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          result.failure = { code: 'redirect_invalid', message: `${url.href} redirects to "${location.slice(0, 300)}", which is not a URL.` };
          return result;
        }
        next.hash = '';
        if (next.protocol !== 'http:' && next.protocol !== 'https:') {
          result.failure = {
            code: 'redirect_invalid',
            message: `${url.href} redirects to a ${next.protocol} URL; only http and https pages can embed the window.`,
          };
          return result;
        }
        if (next.href.length > MAX_URL_CHARS) {
          result.failure = {
            code: 'redirect_invalid',
            message: `${url.href} redirects to a URL longer than ${MAX_URL_CHARS} characters, which the check does not follow.`,
          };
          return result;
        }
        if (next.username || next.password) {
          result.failure = {
            code: 'redirect_invalid',
            message: `${url.href} redirects to a URL with a user name or password, which the check does not follow.`,
          };
          return result;
        }
        if (!opts.originAllowed(next.origin)) {
          result.failure = {
            code: 'origin_not_allowed',
            message: `${url.href} redirects to ${next.href}, whose origin ${next.origin} is not among the site's allowed origins: the window would refuse to open there. Check that page's URL, or add ${next.origin} to the allowed origins.`,
          };
          return result;
        }
        if (seen.has(next.href)) {
          result.failure = { code: 'redirect_loop', message: `The redirects loop: ${next.href} was already visited (${[...seen].join(' → ')}).` };
          return result;
        }
        if (result.redirects.length > opts.maxRedirects) {
          result.failure = {
            code: 'too_many_redirects',
            message: `More than ${opts.maxRedirects} redirects (${[...seen].join(' → ')} → …); check the page's final URL directly.`,
          };
          return result;
        }
        seen.add(next.href);
        url = next;
        continue;
      }
      if (!reader.wantsBody(res.statusCode ?? 0, res.headers, url)) {
        req.destroy();
        return result;
      }
      const decoder = decoderFor(res.headers['content-encoding'] as string | undefined);
      if (decoder === 'unknown') {
        req.destroy();
        result.failure = {
          code: 'unreadable',
          message: `The page is sent with Content-Encoding: ${res.headers['content-encoding']}, which the check cannot read.`,
        };
        return result;
      }
      let body: Readable = res;
      if (decoder) {
        pipeline(res, decoder, () => undefined);
        body = decoder;
      }
      const text = new TextDecoder('utf-8');
      try {
        for await (const chunk of body as AsyncIterable<Buffer>) {
          const room = opts.maxBytes - result.bytesRead;
          const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
          result.bytesRead += part.length;
          const done = reader.onText(text.decode(part, { stream: true }));
          if (done) break;
          if (result.bytesRead >= opts.maxBytes) {
            result.truncated = true;
            break;
          }
        }
      } catch (err) {
        if (err instanceof Timeout || controller.signal.aborted) throw new Timeout();
        result.failure = { code: 'unreadable', message: `The page's body was cut off after ${result.bytesRead} bytes (${describeError(err)}).` };
      } finally {
        // Stops the download: read no more than was wanted.
        req.destroy();
        if (decoder) decoder.destroy();
      }
      return result;
    }
  } catch (err) {
    result.failure = failureOf(controller.signal.aborted ? new Timeout() : err, url, opts.timeoutMs);
    return result;
  } finally {
    clearTimeout(timer);
    current?.destroy();
  }
}
