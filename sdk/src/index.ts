/**
 * @chat-service/sdk: the typed client of the Website Chat API, and verification of its events.
 * Runs on Node.js 18+ and on any runtime with `fetch` and Web Crypto.
 */
export { createClient, ChatClient, isOwnMessage } from './client';
export type { ClientOptions, RequestOptions, ReplyOptions, ReplyParams, FileInput, MediaFile, ResponseMeta, WithResponse } from './client';
export { Paginator } from './pagination';
export type { Page } from './pagination';
export type { FetchLike, RetryPolicy } from './transport';
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
} from './errors';
export type { ApiErrorInit, ErrorCode, ErrorDetail, WebhookVerificationReason } from './errors';
export { verifyWebhook, signTestWebhook, computeWebhookSignature, MemoryReplayStore, defaultReplayStore } from './webhooks';
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
} from './webhooks';
export { processWebhook, handleWebhookRequest, createNodeWebhookHandler, expressWebhookHandler, fastifyWebhookPlugin } from './webhook-handlers';
export type {
  WebhookHandlerOptions,
  WebhookOutcome,
  NodeRequestLike,
  NodeResponseLike,
  FastifyInstanceLike,
  FastifyRequestLike,
  FastifyReplyLike,
  FastifyWebhookOptions,
} from './webhook-handlers';
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
} from './types';
/** The generated types of the whole OpenAPI document, for typing your own code against it. */
export type { paths, components, operations, webhooks } from './generated/api';
export { VERSION } from './version';
