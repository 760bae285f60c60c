import { ApiConnectionError, ApiTimeoutError, RequestAbortedError } from './errors';
import { randomUUID } from './crypto';

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

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxRetries: 2,
  timeoutMs: 60_000,
  initialRetryDelayMs: 500,
  maxRetryDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
};

/** How many attempts produced a given answer (read by the client for `lastResponse.attempts`). */
export const attemptsOf = new WeakMap<Response, number>();

const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

/** Certificate and TLS failures do not heal by retrying; they are thrown at once. */
function isPermanentConnectionFailure(err: unknown): boolean {
  const codes: string[] = [];
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') codes.push(e.code);
  }
  return codes.some((c) => /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME|ERR_TLS|ERR_SSL|ERR_INVALID_URL/.test(c));
}

function describeConnectionFailure(err: unknown, url: string): string {
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

function backoffMs(policy: RetryPolicy, retry: number): number {
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
function retryDelayFor(response: Response, bytes: ArrayBuffer | null, policy: RetryPolicy, retry: number): number | null {
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
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

/** Replies are POSTs to `.../conversations/{id}/messages`: they get an Idempotency-Key when they lack one. */
function isReply(method: string, url: string): boolean {
  if (method !== 'POST') return false;
  try {
    return /\/conversations\/[^/]+\/messages\/?$/.test(new URL(url).pathname);
  } catch {
    return false;
  }
}

/**
 * Wraps `fetch` with what openapi-fetch leaves out by design: a time-out per attempt, retries
 * with exponential back-off and jitter, and the same Idempotency-Key on every attempt of a reply.
 *
 * The request body is read once and sent as the same bytes on every attempt (so a multipart
 * body keeps its boundary and the service sees an identical request). The whole answer is read
 * within the attempt's time-out, so a stalled body is a time-out too, and a connection that
 * drops mid-answer is retried like one that dropped before it.
 */
export function createTransport(fetchImpl: FetchLike, policy: RetryPolicy) {
  return async function send(request: Request): Promise<Response> {
    const signal = request.signal;
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    if (isReply(request.method, request.url) && !('idempotency-key' in headers)) {
      headers['idempotency-key'] = await randomUUID();
    }
    const body = request.body ? await request.arrayBuffer() : undefined;

    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) throw new RequestAbortedError({ cause: signal.reason });
      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort(new ApiTimeoutError(`No complete answer within ${policy.timeoutMs} ms.`));
      }, policy.timeoutMs);
      const onAbort = () => controller.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });

      let response: Response;
      let bytes: ArrayBuffer | null;
      try {
        response = await fetchImpl(request.url, {
          method: request.method,
          headers,
          body,
          signal: controller.signal,
          redirect: 'manual',
        });
        bytes = NULL_BODY_STATUS.has(response.status) ? null : await response.arrayBuffer();
      } catch (err) {
        if (signal.aborted) throw new RequestAbortedError({ cause: signal.reason });
        const failure = timedOut
          ? new ApiTimeoutError(`No complete answer from ${new URL(request.url).origin} within ${policy.timeoutMs} ms.`, { cause: err, attempts: attempt })
          : new ApiConnectionError(describeConnectionFailure(err, request.url), { cause: err, attempts: attempt });
        if (attempt <= policy.maxRetries && !isPermanentConnectionFailure(err)) {
          await sleep(backoffMs(policy, attempt), signal);
          continue;
        }
        throw failure;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }

      if (attempt <= policy.maxRetries) {
        const delay = retryDelayFor(response, bytes, policy, attempt);
        if (delay !== null) {
          await sleep(delay, signal);
          continue;
        }
      }
      const buffered = new Response(bytes, { status: response.status, statusText: response.statusText, headers: response.headers });
      attemptsOf.set(buffered, attempt);
      return buffered;
    }
  };
}
