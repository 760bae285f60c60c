import https from 'node:https';
import tls from 'node:tls';
import type { ClientRequest } from 'node:http';
import { memoised } from '../platform/memo';
import { createPinnedAgentPool, PinnedAgentLease, pinnedLookup } from './agents';
import { BlockedIpError, DnsTimeoutError, hostOf, resolveChecked, ResolvedIp, Resolver } from './ssrf';

export interface TransportOptions {
  /** The whole attempt (name resolution, connect, TLS, answer) must end within this. */
  timeoutMs: number;
  allowPrivate: boolean;
  /** CAs trusted besides Node's root store (WEBHOOK_CA_FILE); none: the root store alone. */
  ca?: (string | Buffer)[];
  resolve?: Resolver;
  /** Idle connections are closed after this (default 4000 ms; see PinnedAgentPoolOptions). */
  keepAliveMs?: number;
  /** Idle connections kept per event address's agent (default 4, the worker's per-address cap). */
  maxIdleSocketsPerAddress?: number;
  /** Pinned agents kept at most (default 64). */
  maxAgents?: number;
}

/** One attempt's options for postOnce. */
export type PostOptions = TransportOptions;

export interface PostResult {
  /** HTTP status, or null when no answer arrived. */
  status: number | null;
  /** Error text of the delivery log vocabulary, or null. */
  error: string | null;
  /** The first 1 KiB of the answer body. */
  response: string | null;
}

export interface DeliveryTransport {
  /**
   * One delivery attempt: an HTTPS POST of `body` to `url`, SSRF-checked before every attempt, sent
   * only to the checked resolved IPs, TLS verified against the name, no redirect followed (a 3xx is
   * just an answer). Never throws: every outcome becomes a PostResult.
   */
  post(url: string, body: string | Buffer, headers: Record<string, string>): Promise<PostResult>;
  /** Pinned agents held now (diagnostics and tests). */
  agentCount(): number;
  /** Closes every connection; posts still running end as errors. */
  close(): void;
}

const EXCERPT_BYTES = 1024;
/**
 * How much of an answer is read, past the 1 KiB excerpt, to keep its connection for the next
 * delivery. Reading is cheaper than a new TLS handshake up to a few tens of KiB; beyond this the
 * connection is dropped instead (a receiver that answers with a page of HTML).
 */
export const DRAIN_LIMIT_BYTES = 64 * 1024;

/** Maps a transport failure to the short, stable texts of the delivery log. */
export function describeError(err: unknown): string {
  if (err instanceof BlockedIpError) return 'blocked address';
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

/**
 * The delivery transport of one worker, made once: one TLS secure context (Node's roots plus
 * WEBHOOK_CA_FILE's CA, parsed once instead of at every attempt) and keep-alive connections per
 * checked set of resolved IPs (server/webhooks/agents.ts).
 */
export function createDeliveryTransport(opts: TransportOptions): DeliveryTransport {
  const secureContext = tls.createSecureContext(opts.ca?.length ? { ca: [...tls.rootCertificates, ...opts.ca] } : {});
  const pool = createPinnedAgentPool({
    secureContext,
    keepAliveMs: opts.keepAliveMs ?? 4000,
    maxIdleSocketsPerAddress: opts.maxIdleSocketsPerAddress ?? 4,
    maxAgents: opts.maxAgents ?? 64,
  });

  // An address is parsed once, not at every attempt: a worker sends to few addresses, many times.
  const parsed = memoised(1000, (url: string) => {
    const target = new URL(url);
    return { hostname: hostOf(target), port: Number(target.port) || 443, path: target.pathname + target.search };
  });

  // A string body leaves in one write with the headers (Node joins them); a Buffer takes two.
  function post(url: string, body: string | Buffer, headers: Record<string, string>): Promise<PostResult> {
    const contentLength = String(Buffer.byteLength(body));
    return new Promise((resolve) => {
      const { hostname, port, path } = parsed(url);
      let settled = false;
      let lease: PinnedAgentLease | undefined;
      let current: ClientRequest | undefined; // the exchange in progress; a retry replaces it
      let open = false; // `current` has not closed yet (it may still be reading the rest of an answer)

      /** Everything of this attempt is over: the agent may be dropped once idle. */
      const end = () => {
        clearTimeout(timer);
        lease?.release();
      };
      const report = (result: PostResult) => {
        if (settled) return;
        settled = true;
        resolve(result);
        if (!open) end();
      };
      // The time-out counts from the start of the attempt: DNS, connect, TLS and the answer. If the
      // status line already arrived, the answer stands and only the rest of its body is cut off.
      const timer = setTimeout(() => {
        report({ status: null, error: `timeout after ${opts.timeoutMs} ms`, response: null });
        current?.destroy();
      }, opts.timeoutMs);

      const send = (resolvedIps: ResolvedIp[], via: 'pool' | 'fresh socket') => {
        let responded = false;
        const req = https.request(
          {
            method: 'POST',
            host: hostname, // kept for SNI and the certificate's name check
            port,
            path,
            headers: { ...headers, 'Content-Length': contentLength },
            // The retry below needs a connection of its own, outside the pool, pinned all the same.
            ...(via === 'pool' ? { agent: lease!.agent } : { agent: false, lookup: pinnedLookup(resolvedIps), secureContext, rejectUnauthorized: true }),
          },
          (res) => {
            responded = true;
            const chunks: Buffer[] = [];
            let received = 0;
            const answer = () =>
              report({ status: res.statusCode ?? null, error: null, response: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8') });
            res.on('data', (chunk: Buffer) => {
              if (received < EXCERPT_BYTES) chunks.push(chunk);
              received += chunk.length;
              if (received >= EXCERPT_BYTES) answer(); // enough for the log; the rest is read so the connection can be reused
              if (received > DRAIN_LIMIT_BYTES) req.destroy();
            });
            res.on('end', answer);
            res.on('error', answer); // cut off mid-body: the status already decides the outcome
            res.on('close', answer);
          },
        );
        current = req;
        open = true;
        req.on('close', () => {
          if (current !== req) return;
          open = false;
          if (settled) end();
        });
        req.on('error', (err) => {
          if (responded || settled) return;
          /*
           * A kept-alive connection that the receiver closed while it sat idle fails on first use
           * with a reset before any byte of answer (Node documents this race under
           * `request.reusedSocket`). That is not the receiver failing, so it is tried once more
           * right away on a new connection, within the same attempt and time-out, instead of being
           * logged as a failed attempt and resent 5 s later.
           *
           * Can this deliver twice? Only if the receiver took the POST and then reset without
           * answering. undici and Bun refuse to replay non-idempotent requests for that reason; we
           * accept it here because delivery is at least once by contract (docs/events.md, "Retries"):
           * every receiver must dedupe on X-Service-Delivery, and the alternative (a failed
           * attempt) resends the very same body a few seconds later anyway. The replay happens at
           * most once, only on a reused connection, only before any answer byte.
           */
          if (via === 'pool' && req.reusedSocket && describeError(err) === 'connection reset') {
            pool.dropIdleSockets(lease!.agent); // its siblings were likely closed by the receiver too
            send(resolvedIps, 'fresh socket');
            return;
          }
          report({ status: null, error: describeError(err), response: null });
        });
        req.end(body);
      };

      resolveChecked(hostname, { allowPrivate: opts.allowPrivate, resolve: opts.resolve }).then(
        (resolvedIps) => {
          if (settled) return;
          lease = pool.acquire(hostname, port, resolvedIps);
          send(resolvedIps, 'pool');
        },
        (err) => report({ status: null, error: describeError(err), response: null }),
      );
    });
  }

  return { post, agentCount: () => pool.size(), close: () => pool.close() };
}

/** One attempt on a transport of its own, closed afterwards (one-off callers and tests). */
export async function postOnce(url: string, body: string | Buffer, headers: Record<string, string>, opts: PostOptions): Promise<PostResult> {
  const transport = createDeliveryTransport(opts);
  try {
    return await transport.post(url, body, headers);
  } finally {
    transport.close();
  }
}
