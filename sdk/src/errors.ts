import type { components } from './generated/api.js';

export type ErrorDetail = components['schemas']['ErrorDetail'];

/** The codes this version of the service answers with (`Error.code` in the OpenAPI document). */
export type KnownErrorCode = components['schemas']['Error']['code'];

/**
 * An error's `code`. `string` keeps room for codes a newer service adds: such an error still
 * becomes the `ApiError` subclass of its HTTP status.
 */
export type ErrorCode =
  | KnownErrorCode
  /** The answer was not in the `{error: {...}}` envelope (a proxy's page, for example). */
  | 'unexpected_response'
  | (string & {});

/** Every error the SDK throws derives from this class. */
export class ChatError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export interface ApiErrorInit {
  status: number;
  code: ErrorCode;
  message: string;
  details?: ErrorDetail[];
  requestId?: string | null;
  headers?: Headers;
  /** Number of attempts made (1 when the SDK did not retry). */
  attempts?: number;
}

/**
 * The service answered with an error (`{error: {code, message, details?}}`).
 * `status` is the HTTP status, `code` the stable machine-readable code, `message` the service's
 * human-readable explanation, `requestId` the `X-Request-Id` to quote to support.
 */
export class ApiError extends ChatError {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetail[] | undefined;
  readonly requestId: string | null;
  readonly headers: Headers;
  readonly attempts: number;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId ?? null;
    this.headers = init.headers ?? new Headers();
    this.attempts = init.attempts ?? 1;
  }

  /** Builds the subclass that matches the status. */
  static from(init: ApiErrorInit): ApiError {
    switch (init.status) {
      case 400:
        return new BadRequestError(init);
      case 401:
        return new AuthenticationError(init);
      case 403:
        return new PermissionDeniedError(init);
      case 404:
        return new NotFoundError(init);
      case 409:
        return new ConflictError(init);
      case 413:
        return new PayloadTooLargeError(init);
      case 422:
        return new UnprocessableEntityError(init);
      case 429:
        return new RateLimitError(init);
      default:
        return init.status >= 500 ? new InternalServerError(init) : new ApiError(init);
    }
  }
}

/** 400 `invalid_request`: `details` lists each problem as `{path, message}`. */
export class BadRequestError extends ApiError {}
/** 401 `unauthorized`: the key is missing, wrong or revoked. */
export class AuthenticationError extends ApiError {}
/** 403 `insufficient_scope`: the key lacks the right this operation needs. */
export class PermissionDeniedError extends ApiError {}
/** 404 `not_found`: no such resource for this key's site (another site's looks the same). */
export class NotFoundError extends ApiError {}
/** 409 `conversation_closed` (reply to a closed conversation) or `idempotency_key_in_use`. */
export class ConflictError extends ApiError {}
/** 413 `payload_too_large`: JSON over 64 KiB, a file over 20 MiB, or more than 10 files. */
export class PayloadTooLargeError extends ApiError {}
/** 422 `idempotency_key_reused`: the Idempotency-Key was used with a different request. */
export class UnprocessableEntityError extends ApiError {}
/** 429 `rate_limit_exceeded`, thrown when the retries are used up. */
export class RateLimitError extends ApiError {
  /** Seconds the service asked to wait (`Retry-After`), when it said. */
  get retryAfterSeconds(): number | null {
    const value = this.headers.get('retry-after');
    const n = value === null ? NaN : Number(value);
    return Number.isFinite(n) ? n : null;
  }
}
/** 5xx: `internal_error`, `service_unavailable`, or a failing proxy; thrown when the retries are used up. */
export class InternalServerError extends ApiError {}

/** No answer arrived: refused or dropped connection, DNS failure, TLS failure. */
export class ApiConnectionError extends ChatError {
  readonly attempts: number;
  constructor(message: string, options: { cause?: unknown; attempts?: number } = {}) {
    super(message, { cause: options.cause });
    this.attempts = options.attempts ?? 1;
  }
}

/** No complete answer within `timeoutMs` (per attempt). */
export class ApiTimeoutError extends ApiConnectionError {}

/** The caller's `signal` aborted the call. `name` is `AbortError`, as for `fetch`. */
export class RequestAbortedError extends ChatError {
  constructor(options: { cause?: unknown } = {}) {
    super('The request was aborted.', options);
    this.name = 'AbortError';
  }
}

/** Which webhook check failed. */
export type WebhookVerificationReason =
  /** A required `X-Service-*` header is absent. */
  | 'missing_header'
  /** `X-Service-Signature` is not `sha256=` followed by 64 lowercase hex digits. */
  | 'malformed_signature'
  /** `X-Service-Timestamp` is not whole Unix seconds. */
  | 'malformed_timestamp'
  /** No secret produced this signature: wrong secret, or the body or timestamp was altered. */
  | 'signature_mismatch'
  /** The timestamp is older than the tolerance (a captured delivery played back later). */
  | 'timestamp_too_old'
  /** The timestamp is further in the future than the tolerance (clock skew or a forged time). */
  | 'timestamp_in_future'
  /** `rawBody` is not the raw bytes (a parsed object), or the signed body is not a JSON event. */
  | 'invalid_body'
  /** `X-Service-Delivery` differs from the signed body's `id` (the header is not signed). */
  | 'delivery_id_mismatch'
  /** `X-Service-Event` differs from the signed body's `event`. */
  | 'event_mismatch'
  /** This delivery id is `done` in the replay store (a retry or redelivery of an event you processed). */
  | 'replayed'
  /**
   * This delivery id is `processing` in the replay store: its listener is running (in this or
   * another process), or stopped less than `processingTtlSeconds` ago. Answer 503 so that the
   * service retries later.
   */
  | 'in_progress';

/** A webhook delivery failed verification; `reason` says which check. */
export class WebhookVerificationError extends ChatError {
  readonly reason: WebhookVerificationReason;
  /** The delivery id, when it could be read. */
  readonly deliveryId: string | null;
  constructor(reason: WebhookVerificationReason, message: string, deliveryId: string | null = null) {
    super(message);
    this.reason = reason;
    this.deliveryId = deliveryId;
  }
}
