import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { BlockedAddressError, DnsTimeoutError, hostOf, resolveChecked, ResolvedAddress, Resolver } from './ssrf';

export interface PostOptions {
  /** The whole attempt (name resolution, connect, TLS, answer) must end within this. */
  timeoutMs: number;
  allowPrivate: boolean;
  /** Trusted CAs; undefined means the system store. */
  ca?: (string | Buffer)[];
  resolve?: Resolver;
}

export interface PostResult {
  /** HTTP status, or null when no answer arrived. */
  status: number | null;
  /** Error text of the delivery log vocabulary, or null. */
  error: string | null;
  /** The first 1 KiB of the answer body. */
  response: string | null;
}

const EXCERPT_BYTES = 1024;

/** Maps a transport failure to the short, stable texts of the delivery log. */
export function describeError(err: unknown): string {
  if (err instanceof BlockedAddressError) return 'blocked address';
  if (err instanceof DnsTimeoutError) return 'dns timeout';
  const e = err as { code?: string; message?: string };
  const code = e?.code ?? '';
  if (code === 'ECONNRESET' || code === 'EPIPE' || /socket hang up/i.test(e?.message ?? '')) return 'connection reset';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NODATA') return 'name not resolved';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME|HOSTNAME_MISMATCH/.test(code)) return 'certificate rejected';
  if (code.startsWith('ERR_SSL') || code === 'EPROTO') return 'tls handshake failed';
  return `connection error: ${code || e?.message || String(err)}`.slice(0, 200);
}

/** A `lookup` that answers with the addresses we already checked, so the socket cannot go elsewhere. */
function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, addresses[0].address, addresses[0].family);
  }) as unknown as LookupFunction;
}

/**
 * One delivery attempt: an HTTPS POST of `body` to `url`, SSRF-checked at connect, TLS verified,
 * no redirect followed (a 3xx is just an answer), no connection reuse (every attempt resolves and
 * checks again). Never throws: every outcome becomes a PostResult.
 */
export function postOnce(url: string, body: Buffer, headers: Record<string, string>, opts: PostOptions): Promise<PostResult> {
  return new Promise((resolve) => {
    let settled = false;
    let status: number | null = null;
    const chunks: Buffer[] = [];
    let received = 0;
    let req: ReturnType<typeof https.request> | undefined;

    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy();
      const response = status === null ? null : Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8');
      resolve({ status, error, response });
    };
    // The time-out counts from the start of the attempt, connect included. If the status line
    // already arrived, the answer stands and only the rest of its body is cut off.
    const timer = setTimeout(() => finish(status === null ? `timeout after ${opts.timeoutMs} ms` : null), opts.timeoutMs);

    const target = new URL(url);
    const hostname = hostOf(target);
    resolveChecked(hostname, { allowPrivate: opts.allowPrivate, resolve: opts.resolve }).then(
      (addresses) => {
        if (settled) return;
        req = https.request(
          {
            method: 'POST',
            protocol: 'https:',
            host: hostname, // kept for SNI and the certificate's name check
            port: target.port || 443,
            path: target.pathname + target.search,
            headers: { ...headers, 'Content-Length': String(body.length) },
            lookup: pinnedLookup(addresses),
            agent: false,
            ca: opts.ca,
            rejectUnauthorized: true,
          },
          (res) => {
            status = res.statusCode ?? null;
            res.on('data', (chunk: Buffer) => {
              if (received < EXCERPT_BYTES) chunks.push(chunk);
              received += chunk.length;
              if (received >= EXCERPT_BYTES) finish(null); // enough to show in the log
            });
            res.on('end', () => finish(null));
            res.on('error', () => finish(null)); // the status already decides the outcome
          },
        );
        req.on('error', (err) => finish(status === null ? describeError(err) : null));
        req.end(body);
      },
      (err) => finish(describeError(err)),
    );
  });
}
