import type { components } from '../../sdk/src/generated/api';
import type { components as manageComponents } from '../manage/generated/api';

/** The public API's error codes: the `enum` of `Error.code` in openapi/openapi.yaml, the one list of them. */
export type PublicErrorCode = components['schemas']['Error']['code'];
/**
 * Every code the service answers: the public API's and the management API's own (`forbidden`,
 * `cross_site_request`, `reauthentication_required`, `conflict`), the `enum` of `Error.code` in openapi/manage.yaml.
 */
export type ErrorCode = PublicErrorCode | manageComponents['schemas']['Error']['code'];

/**
 * Each code's HTTP status. Typed by the document's list, so a code added there and missing here,
 * or one here the document does not list, fails type-checking.
 */
export const ERROR_STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  forbidden: 403,
  cross_site_request: 403,
  reauthentication_required: 403,
  not_found: 404,
  method_not_allowed: 405,
  conversation_closed: 409,
  conflict: 409,
  idempotency_key_in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limit_exceeded: 429,
  quota_exceeded: 429,
  internal_error: 500,
  service_unavailable: 503,
  insufficient_storage: 507,
};

export type ErrorDetail = components['schemas']['ErrorDetail'];

/** An error meant for the client: it becomes `{error: {code, message, details?}}`. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found.`);
export const invalid = (message: string, details?: ErrorDetail[]) => new ApiError('invalid_request', message, details);
