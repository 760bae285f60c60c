/**
 * @chat-service/sdk: the typed client of the Website Chat API, and verification of its events.
 * Runs on Node.js 18+ and on any runtime with `fetch` and Web Crypto.
 */
export { createClient, ChatClient, isOwnMessage } from './client.js';
export type { ClientOptions, RequestOptions, ReplyOptions, ReplyParams, FileInput, MediaFile, ResponseMeta, WithResponse } from './client.js';
export { Paginator } from './pagination.js';
export type { Page } from './pagination.js';
export type { FetchLike, RetryPolicy } from './transport.js';
export {
  ChatError,
  ApiError,
  BadRequestError,
  AuthenticationError,
  PermissionDeniedError,
  NotFoundError,
  ConflictError,
  PayloadTooLargeError,
  UnprocessableEntityError,
  RateLimitError,
  InternalServerError,
  ApiConnectionError,
  ApiTimeoutError,
  RequestAbortedError,
  WebhookVerificationError,
} from './errors.js';
export type { ApiErrorInit, ErrorCode, KnownErrorCode, ErrorDetail, WebhookVerificationReason } from './errors.js';
export { verifyWebhook, signTestWebhook, computeWebhookSignature, MemoryReplayStore, defaultReplayStore } from './webhooks.js';
export type {
  VerifyWebhookOptions,
  WebhookSecrets,
  WebhookReplayStore,
  WebhookDeliveryState,
  WebhookBeginResult,
  ClaimOnlyReplayStore,
  WebhookHeaders,
  RawBody,
  SignTestWebhookOptions,
  SignedTestWebhook,
} from './webhooks.js';
export { processWebhook, handleWebhookRequest, createNodeWebhookHandler, expressWebhookHandler, fastifyWebhookPlugin } from './webhook-handlers.js';
export type {
  WebhookHandlerOptions,
  WebhookOutcome,
  NodeRequestLike,
  NodeResponseLike,
  FastifyInstanceLike,
  FastifyRequestLike,
  FastifyReplyLike,
  FastifyWebhookOptions,
} from './webhook-handlers.js';
export type {
  Conversation,
  ConversationState,
  Message,
  MessageDirection,
  MessageOrigin,
  MessageFormat,
  Attachment,
  PageInfo,
  WebhookEvent,
  WebhookEventName,
  WebhookEventOf,
  ConversationStartedEvent,
  MessageCreatedEvent,
  ConversationClosedEvent,
  ListConversationsParams,
  ListMessagesParams,
} from './types.js';
/** The generated types of the whole OpenAPI document, for typing your own code against it. */
export type { paths, components, operations, webhooks } from './generated/api.js';
export { VERSION } from './version.js';
