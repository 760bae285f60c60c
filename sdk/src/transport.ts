/**
 * The rules of the SDK's one call path (`ChatClient.request` in client.ts): what is retried, after
 * how long, and how a failure without an answer is described. Pure functions and constants; the
 * call path itself, and all state of a call, live in that one method.
 */
import { RequestAbortedError } from './errors.js';

/**
 * The `fetch` the SDK calls: `(url, init) => Response`. The global `fetch` fits, and so does
 * undici's `fetch` or any wrapper of it. The SDK always passes a URL string and a plain init
 * object (headers as a record, the body as bytes), so wrappers never meet a foreign `Request`.
 */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

export interface RetryPolicy {
  /** Retries after the first attempt (default 2, so at most 3 attempts). */
  maxRetries: number;
  /** Limit of one attempt, from sending to the last byte of the answer (default 60 s). */
  timeoutMs: number;
  /** First back-off pause (default 500 ms); it doubles per retry, with jitter. */
  initialRetryDelayMs: number;
  /** Longest back-off pause (default 8 s). */
  maxRetryDelayMs: number;
  /** Longest `Retry-After` the SDK waits for; above it the 429 is thrown at once (default 60 s). */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 2,
  timeoutMs: 60_000,
  initialRetryDelayMs: 500,
  maxRetryDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
});

/** Statuses whose answer has no body (`new Response(body)` refuses one for them). */
export function hasNullBody(status: number): boolean {
  return status === 101 || status === 103 || status === 204 || status === 205 || status === 304;
}

/** Certificate and TLS failures do not heal by retrying; they are thrown at once. */
export function isPermanentConnectionFailure(err: unknown): boolean {
  const codes: string[] = [];
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') codes.push(e.code);
  }
  return codes.some((c) => /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME|ERR_TLS|ERR_SSL|ERR_INVALID_URL/.test(c));
}

export function describeConnectionFailure(err: unknown, url: string): string {
  let detail = '';
  for (let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') {
      detail = e.code + (typeof e.message === 'string' && e.message && !e.message.includes(e.code) ? `: ${e.message}` : '');
      break;
    }
    if (typeof e.message === 'string' && e.message && e.message !== 'fetch failed') detail = e.message;
  }
  const origin = (() => {
    try {
      return new URL(url).origin;
    } catch {
      return url;
    }
  })();
  return `Could not reach ${origin}${detail ? ` (${detail})` : ''}.`;
}

/** Seconds or an HTTP date, as in RFC 9110; null when absent or unreadable. */
function parseRetryAfterMs(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

export function backoffMs(policy: RetryPolicy, retry: number): number {
  const base = Math.min(policy.initialRetryDelayMs * 2 ** (retry - 1), policy.maxRetryDelayMs);
  return Math.round(base * (0.5 + Math.random() * 0.5)); // jitter: 50 % to 100 % of the step
}

function errorCode(bytes: ArrayBuffer | null): string | null {
  if (!bytes || bytes.byteLength === 0 || bytes.byteLength > 65536) return null;
  try {
    const parsed = JSON.parse(new TextDecoder().decode(bytes)) as { error?: { code?: unknown } };
    return typeof parsed?.error?.code === 'string' ? parsed.error.code : null;
  } catch {
    return null;
  }
}

/**
 * How long to wait before retrying this answer, or null when it must not be retried.
 * Retried: 429 (after `Retry-After`), 408, 5xx (after `Retry-After` when given), and 409
 * `idempotency_key_in_use` (the first request with the same key is still running; stripe-node
 * retries it too). Every other 4xx is final.
 */
export function retryDelayFor(response: Response, bytes: ArrayBuffer | null, policy: RetryPolicy, retry: number): number | null {
  const status = response.status;
  const retryAfter = parseRetryAfterMs(response.headers.get('retry-after'));
  if (status === 429) {
    if (retryAfter === null) return backoffMs(policy, retry);
    return retryAfter <= policy.maxRetryAfterMs ? retryAfter : null;
  }
  if (status >= 500 || status === 408) {
    return retryAfter !== null && retryAfter <= policy.maxRetryAfterMs ? retryAfter : backoffMs(policy, retry);
  }
  if (status === 409 && errorCode(bytes) === 'idempotency_key_in_use') return backoffMs(policy, retry);
  return null;
}

/** Waits `ms`; the caller's `signal` cuts the pause short with `RequestAbortedError`. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!signal) {
      setTimeout(resolve, ms);
      return;
    }
    if (signal.aborted) return reject(new RequestAbortedError({ cause: signal.reason }));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new RequestAbortedError({ cause: signal.reason }));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
