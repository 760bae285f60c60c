import createFetchClient from 'openapi-fetch';
import type { Client } from 'openapi-fetch';
import type { paths } from './generated/api.js';
import { ApiConnectionError, ApiError, ApiTimeoutError, ChatError, RequestAbortedError, type ErrorDetail } from './errors.js';
import {
  backoffMs,
  DEFAULT_RETRY_POLICY,
  describeConnectionFailure,
  hasNullBody,
  isPermanentConnectionFailure,
  retryDelayFor,
  sleep,
  type FetchLike,
  type RetryPolicy,
} from './transport.js';
import { Paginator, type Page } from './pagination.js';
import { isBrowserPage, userAgent } from './runtime.js';
import { randomUUID } from './crypto.js';
import type { Attachment, Conversation, ListConversationsParams, ListMessagesParams, Message, MessageFormat } from './types.js';

export interface ClientOptions {
  /** The site's access key, `wck_...`. Server-side only: never put it in page code. */
  apiKey: string;
  /**
   * `https://host:port/api/v1`. A URL without a path gets `/api/v1` appended. Plain `http://` is
   * refused except for loopback hosts (a local TLS-terminating proxy).
   */
  baseUrl: string;
  /** Limit of one attempt, from sending to the last byte of the answer. Default 60 000 ms. */
  timeoutMs?: number;
  /** Retries after a 429, 408, 5xx, dropped connection or time-out. Default 2 (3 attempts); 0 disables. */
  maxRetries?: number;
  /**
   * The `fetch` to use, `(url, init) => Promise<Response>`; default `globalThis.fetch`. Use it for
   * proxies, custom CAs (undici `Agent` as `dispatcher`), or instrumentation.
   */
  fetch?: FetchLike;
  /**
   * Id of this access key (`key_...`, printed by `key create` as `id`). With it, `isOwnMessage`
   * is exact from the first event. Without it the client learns the id from its first reply.
   */
  keyId?: string;
  /** Your product, `name/version`, put in front of the SDK's User-Agent. */
  appInfo?: string;
  /** Back-off tuning; the defaults suit almost everyone. */
  retry?: Partial<Pick<RetryPolicy, 'initialRetryDelayMs' | 'maxRetryDelayMs' | 'maxRetryAfterMs'>>;
  /** The SDK refuses to run in a web page, where the key would be exposed. Set only if you know why. */
  dangerouslyAllowBrowser?: boolean;
}

/** Options every call takes. */
export interface RequestOptions {
  /** Aborts the call, retries and back-off pauses included; it then throws `RequestAbortedError`. */
  signal?: AbortSignal;
  /** This call's per-attempt time-out instead of the client's. */
  timeoutMs?: number;
  /** This call's retries instead of the client's. */
  maxRetries?: number;
}

export interface ReplyOptions extends RequestOptions {
  /**
   * Makes the reply safe to repeat: the same key within 24 hours answers the first reply and
   * creates nothing. The SDK generates a UUID per `reply` call and reuses it on every retry of
   * that call; pass your own (for example derived from the event you answer) to make repeats of
   * your own code idempotent too. 1 to 255 printable ASCII characters.
   */
  idempotencyKey?: string;
}

/** What the answer said besides its data. Attached to returned objects as a non-enumerable `lastResponse`. */
export interface ResponseMeta {
  status: number;
  /** `X-Request-Id`: quote it when you contact support. */
  requestId: string | null;
  headers: Headers;
  /** Attempts it took (1 when there was no retry). */
  attempts: number;
  /** True when a reply was answered from an earlier request with the same Idempotency-Key. */
  idempotentReplayed: boolean;
}

export type WithResponse<T> = T & { readonly lastResponse: ResponseMeta };

/**
 * A file to attach to a reply: a `Blob`/`File`, or bytes with a name. Node.js Buffers are
 * Uint8Arrays and fit `data`.
 */
export type FileInput = Blob | { data: Blob | ArrayBuffer | ArrayBufferView | string; name: string; type?: string };

export interface ReplyParams {
  /** At most 10 000 characters; may be empty only when a file is attached. */
  content?: string;
  /** `plain` (default) or `markdown` (rendered, sanitised, in the chat window). */
  format?: MessageFormat;
  /** 1 to 10 files of at most 20 MiB each; sent as multipart/form-data. */
  files?: FileInput[];
}

/** A downloaded attachment. */
export interface MediaFile {
  data: Uint8Array;
  /** `Content-Type` of the file, as the visitor sent it. */
  contentType: string;
  size: number;
  /** File name from `Content-Disposition`. */
  filename: string | null;
  etag: string | null;
  requestId: string | null;
}

const KEY_ID = /^key_[0-9a-hjkmnp-tv-z]{26}$/;

function withResponse<T extends object>(data: T, meta: ResponseMeta): WithResponse<T> {
  Object.defineProperty(data, 'lastResponse', { value: meta, enumerable: false, configurable: true });
  return data as WithResponse<T>;
}

function toApiError(response: Response, body: unknown, attempts: number): ApiError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  const requestId = response.headers.get('x-request-id');
  if (envelope && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
    return ApiError.from({
      status: response.status,
      code: envelope.code,
      message: envelope.message,
      details: Array.isArray(envelope.details) ? (envelope.details as ErrorDetail[]) : undefined,
      requestId,
      headers: response.headers,
      attempts,
    });
  }
  const text = typeof body === 'string' ? body.replace(/\s+/g, ' ').trim().slice(0, 200) : '';
  return ApiError.from({
    status: response.status,
    code: 'unexpected_response',
    message: `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''} without an error envelope${text ? `: ${text}` : '.'}`,
    requestId,
    headers: response.headers,
    attempts,
  });
}

function pageOf<T>(answer: { data: T[]; page: { nextCursor: string | null; hasMore: boolean } }, meta: ResponseMeta): Page<T> {
  return { data: answer.data, nextCursor: answer.page.nextCursor, hasMore: answer.page.hasMore, requestId: meta.requestId };
}

/**
 * The one request that creates something, a reply (POST `.../conversations/{id}/messages`): the
 * call path gives it an Idempotency-Key. Read from the URL so that raw `api` calls get it too.
 */
function isReply(method: string, url: string): boolean {
  return method === 'POST' && /\/conversations\/[^/]+\/messages\/?$/.test(new URL(url).pathname);
}

function isMediaDownload(method: string, url: string): boolean {
  return method === 'GET' && /\/media\/[^/]+\/?$/.test(new URL(url).pathname);
}

/**
 * A service that keeps files in an S3-compatible bucket answers a download with 302 to a short-lived
 * presigned URL. It is followed here, within the attempt, without the key (the bucket must never see
 * it); the file's `ETag` and `X-Request-Id` stay the service's.
 */
async function followMediaRedirect(fetchImpl: FetchLike, first: Response, url: string, signal: AbortSignal): Promise<Response> {
  const location = first.headers.get('location');
  if (first.status !== 302 || !location) return first;
  await first.arrayBuffer();
  const file = await fetchImpl(new URL(location, url).href, { method: 'GET', signal, redirect: 'manual' });
  const headers = new Headers(file.headers);
  for (const name of ['etag', 'x-request-id']) {
    const value = first.headers.get(name);
    if (value !== null) headers.set(name, value);
  }
  return new Response(file.body, { status: file.status, statusText: file.statusText, headers });
}

function iso(value: string | Date | undefined): string | undefined {
  return typeof value === 'object' && value !== null && typeof value.toISOString === 'function' ? value.toISOString() : (value as string | undefined);
}

function filenameFrom(disposition: string | null): string | null {
  if (!disposition) return null;
  const extended = /filename\*\s*=\s*[^']*'[^']*'([^;]+)/i.exec(disposition);
  if (extended) {
    try {
      return decodeURIComponent(extended[1].trim());
    } catch {
      // fall back to the plain parameter
    }
  }
  const quoted = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(disposition);
  if (quoted) return quoted[1].replace(/\\(.)/g, '$1');
  const bare = /filename\s*=\s*([^;\s]+)/i.exec(disposition);
  return bare ? bare[1] : null;
}

/** Blob from any realm (`instanceof` fails across realms). */
function isBlob(value: unknown): value is Blob {
  return (
    (typeof Blob !== 'undefined' && value instanceof Blob) ||
    (typeof value === 'object' &&
      value !== null &&
      typeof (value as Blob).arrayBuffer === 'function' &&
      typeof (value as Blob).size === 'number' &&
      typeof (value as Blob).type === 'string')
  );
}

function toBlob(file: FileInput): { blob: Blob; name: string } {
  if (isBlob(file)) {
    const name = (file as Blob & { name?: unknown }).name;
    return { blob: file, name: typeof name === 'string' && name ? name : 'file' };
  }
  const { data, name, type } = file as Exclude<FileInput, Blob>;
  if (typeof name !== 'string' || !name) throw new TypeError('Each file needs a `name`.');
  if (isBlob(data)) return { blob: type ? new Blob([data], { type }) : data, name };
  const part = typeof data === 'string' ? data : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : data;
  return { blob: new Blob([part as BlobPart], { type: type ?? 'application/octet-stream' }), name };
}

function normaliseBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(`baseUrl must be an absolute URL such as https://chat.example.com/api/v1, not ${JSON.stringify(raw)}.`);
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new TypeError(`baseUrl must use https:// (the service has no plaintext listener), not ${url.protocol}//.`);
  }
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/api/v1';
  url.search = '';
  url.hash = '';
  return url.toString().replace(/\/+$/, '');
}

/**
 * Loop protection without a client: true when `message` was written through the API with one of
 * `keyIds`. See `ChatClient.isOwnMessage` for the version that knows its key.
 */
export function isOwnMessage(message: Pick<Message, 'origin' | 'apiKeyId'>, keyIds: string | readonly string[]): boolean {
  const ids = typeof keyIds === 'string' ? [keyIds] : keyIds;
  return message.origin === 'api' && message.apiKeyId !== null && ids.includes(message.apiKeyId);
}

/**
 * The API client. Create it once and share it: it holds no per-call state.
 *
 * One public name per operation, grouped by resource as in the API: `conversations.list/get/close`,
 * `messages.list/create`, `media.download`. Calls return the data (`Conversation`, `Message`) and
 * throw an `ApiError` subclass on an error answer, an `ApiConnectionError`/`ApiTimeoutError` when
 * no answer came, and `RequestAbortedError` when your `signal` aborted. Every call is typed from
 * the OpenAPI document; `api` gives the underlying openapi-fetch client for anything the
 * operations do not cover.
 */
export class ChatClient {
  /**
   * The typed openapi-fetch client, through the same call path as the operations (auth,
   * User-Agent, time-outs, retries, the Idempotency-Key of a reply). It never throws on HTTP errors.
   */
  readonly api: Client<paths>;
  readonly baseUrl: string;
  private readonly policy: Readonly<RetryPolicy>;
  private readonly fetchImpl: FetchLike;
  private readonly knownKeyIds = new Set<string>();

  /** Conversations of the key's site. */
  readonly conversations: {
    /** All conversations matching the filters, newest first, following the cursor as you iterate. */
    list(params?: ListConversationsParams, options?: RequestOptions): Paginator<Conversation>;
    /** One conversation; `NotFoundError` when it does not exist or belongs to another site. */
    get(id: string, options?: RequestOptions): Promise<WithResponse<Conversation>>;
    /** Closes it (emits `conversation.closed` once); closing a closed one returns it unchanged. */
    close(id: string, options?: RequestOptions): Promise<WithResponse<Conversation>>;
  };

  /** Messages of a conversation. */
  readonly messages: {
    /** All messages of the conversation, oldest first (`order: 'desc'` for newest first). */
    list(conversationId: string, params?: ListMessagesParams, options?: RequestOptions): Paginator<Message>;
    /**
     * Replies to the visitor: JSON for text, multipart/form-data when `files` are given. The
     * reply carries an Idempotency-Key (`options.idempotencyKey`, or generated) that stays the
     * same on every retry, so a dropped connection never sends it twice.
     */
    create(conversationId: string, params: ReplyParams, options?: ReplyOptions): Promise<WithResponse<Message>>;
  };

  /** Attachments. */
  readonly media: {
    /** Downloads an attachment by id (or an `Attachment`), with the key; needs `media:read`. */
    download(media: string | Pick<Attachment, 'id'>, options?: RequestOptions): Promise<MediaFile>;
  };

  constructor(options: ClientOptions) {
    if (!options || typeof options.apiKey !== 'string' || !options.apiKey.startsWith('wck_')) {
      throw new TypeError('apiKey must be the site access key, starting with wck_.');
    }
    if (!options.dangerouslyAllowBrowser && isBrowserPage()) {
      throw new ChatError('The access key must stay on your server: this SDK refuses to run in a web page. Call your own backend from the page instead.');
    }
    if (options.keyId !== undefined) {
      if (options.keyId.startsWith('wck_')) throw new TypeError('keyId is the id of the key (key_...), not the secret key itself.');
      if (!KEY_ID.test(options.keyId)) throw new TypeError(`keyId must look like key_<26 characters>, not ${JSON.stringify(options.keyId)}.`);
      this.knownKeyIds.add(options.keyId);
    }
    for (const [name, value] of [
      ['timeoutMs', options.timeoutMs],
      ['maxRetries', options.maxRetries],
    ] as const) {
      if (value !== undefined && !(Number.isFinite(value) && value >= 0)) throw new TypeError(`${name} must be a number >= 0.`);
    }
    const globalFetch = (globalThis as { fetch?: FetchLike }).fetch;
    const fetchImpl = options.fetch ?? (globalFetch ? (url: string, init: RequestInit) => globalFetch(url, init) : undefined);
    if (!fetchImpl) throw new TypeError('No fetch in this runtime: pass `fetch` (Node.js 18+ has it built in).');
    this.fetchImpl = fetchImpl;
    this.baseUrl = normaliseBaseUrl(options.baseUrl);
    this.policy = Object.freeze({
      ...DEFAULT_RETRY_POLICY,
      ...options.retry,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.maxRetries !== undefined ? { maxRetries: Math.floor(options.maxRetries) } : {}),
    });
    this.api = createFetchClient<paths>({
      baseUrl: this.baseUrl,
      // A raw call is one call of `request` that hands the answer back instead of unwrapping it.
      fetch: async (request) => {
        const { data: response } = await this.request(
          (send) => send(request).then((answer) => ({ data: answer, response: answer })),
          { signal: request.signal },
          { raw: true },
        );
        return response;
      },
      headers: { Authorization: `Bearer ${options.apiKey}`, 'User-Agent': userAgent(options.appInfo) },
    });

    this.conversations = {
      list: (params, opts) => this.listConversations(params, opts),
      get: (id, opts) => this.getConversation(id, opts),
      close: (id, opts) => this.closeConversation(id, opts),
    };
    this.messages = {
      list: (conversationId, params, opts) => this.listMessages(conversationId, params, opts),
      create: (conversationId, params, opts) => this.createMessage(conversationId, params, opts),
    };
    this.media = { download: (media, opts) => this.downloadMediaFile(media, opts) };
  }

  /**
   * This client's key id: the `keyId` option, or learned from the `apiKeyId` of its first reply;
   * null until then.
   */
  get keyId(): string | null {
    return this.knownKeyIds.values().next().value ?? null;
  }

  /**
   * Loop protection: true when `message` is a reply written through the API with this client's
   * key, so your integration does not answer (or forward) its own replies.
   *
   * Exact once the key id is known (the `keyId` option, or after the first reply). Before that,
   * every `origin: 'api'` message counts as own: skipping another integration's API reply is
   * harmless, answering your own starts a loop. Messages from visitors (`widget`) and agents
   * (`messenger`) are never own.
   */
  isOwnMessage = (message: Pick<Message, 'origin' | 'apiKeyId'>): boolean => {
    if (message.origin !== 'api') return false;
    if (this.knownKeyIds.size === 0) return true;
    return message.apiKeyId !== null && this.knownKeyIds.has(message.apiKeyId);
  };

  /** @deprecated Since 0.2.0: use `messages.create`, which this calls. Removed in 0.3.0. */
  reply = (conversationId: string, params: ReplyParams, options?: ReplyOptions): Promise<WithResponse<Message>> =>
    this.messages.create(conversationId, params, options);

  /** @deprecated Since 0.2.0: use `conversations.close`, which this calls. Removed in 0.3.0. */
  close = (conversationId: string, options?: RequestOptions): Promise<WithResponse<Conversation>> => this.conversations.close(conversationId, options);

  /** @deprecated Since 0.2.0: use `media.download`, which this calls. Removed in 0.3.0. */
  downloadMedia = (media: string | Pick<Attachment, 'id'>, options?: RequestOptions): Promise<MediaFile> => this.media.download(media, options);

  private listConversations(params: ListConversationsParams = {}, options: RequestOptions = {}): Paginator<Conversation> {
    const { cursor: start, createdAfter, createdBefore, updatedAfter, updatedBefore, ...rest } = params;
    const query = {
      ...rest,
      ...(createdAfter !== undefined ? { createdAfter: iso(createdAfter) } : {}),
      ...(createdBefore !== undefined ? { createdBefore: iso(createdBefore) } : {}),
      ...(updatedAfter !== undefined ? { updatedAfter: iso(updatedAfter) } : {}),
      ...(updatedBefore !== undefined ? { updatedBefore: iso(updatedBefore) } : {}),
    };
    return new Paginator(async (cursor) => {
      const { data, meta } = await this.request(
        (fetch) => this.api.GET('/conversations', { params: { query: { ...query, ...(cursor ? { cursor } : {}) } }, fetch }),
        options,
      );
      return pageOf(data, meta);
    }, start);
  }

  private async getConversation(id: string, options: RequestOptions = {}): Promise<WithResponse<Conversation>> {
    const { data, meta } = await this.request((fetch) => this.api.GET('/conversations/{id}', { params: { path: { id } }, fetch }), options);
    return withResponse(data.data, meta);
  }

  private async closeConversation(id: string, options: RequestOptions = {}): Promise<WithResponse<Conversation>> {
    const { data, meta } = await this.request((fetch) => this.api.POST('/conversations/{id}/close', { params: { path: { id } }, fetch }), options);
    return withResponse(data.data, meta);
  }

  private listMessages(conversationId: string, params: ListMessagesParams = {}, options: RequestOptions = {}): Paginator<Message> {
    const { cursor: start, ...query } = params;
    return new Paginator(async (cursor) => {
      const { data, meta } = await this.request(
        (fetch) =>
          this.api.GET('/conversations/{id}/messages', { params: { path: { id: conversationId }, query: { ...query, ...(cursor ? { cursor } : {}) } }, fetch }),
        options,
      );
      return pageOf(data, meta);
    }, start);
  }

  private async createMessage(conversationId: string, params: ReplyParams, options: ReplyOptions = {}): Promise<WithResponse<Message>> {
    const files = params.files ?? [];
    const path = { id: conversationId };
    const { data, meta } = await this.request((fetch) => {
      if (files.length === 0) {
        return this.api.POST('/conversations/{id}/messages', {
          params: { path },
          body: { content: params.content ?? '', ...(params.format ? { format: params.format } : {}) },
          fetch,
        });
      }
      const form = new FormData();
      if (params.content !== undefined) form.append('content', params.content);
      if (params.format !== undefined) form.append('format', params.format);
      for (const file of files) {
        const { blob, name } = toBlob(file);
        form.append('file', blob, name);
      }
      return this.api.POST('/conversations/{id}/messages', {
        params: { path },
        body: { content: params.content, format: params.format },
        bodySerializer: () => form,
        fetch,
      });
    }, options);
    if (data.data.apiKeyId) this.knownKeyIds.add(data.data.apiKeyId);
    return withResponse(data.data, meta);
  }

  private async downloadMediaFile(media: string | Pick<Attachment, 'id'>, options: RequestOptions = {}): Promise<MediaFile> {
    const id = typeof media === 'string' ? media : media?.id;
    if (typeof id !== 'string' || !id) throw new TypeError('media.download needs an attachment id (med_...) or an attachment.');
    const { data, meta } = await this.request((fetch) => this.api.GET('/media/{id}', { params: { path: { id } }, parseAs: 'arrayBuffer', fetch }), options, {
      allowEmpty: true,
    });
    const bytes = data === undefined ? new Uint8Array(0) : new Uint8Array(data as ArrayBuffer);
    return {
      data: bytes,
      contentType: meta.headers.get('content-type') ?? 'application/octet-stream',
      size: bytes.byteLength,
      filename: filenameFrom(meta.headers.get('content-disposition')),
      etag: meta.headers.get('etag'),
      requestId: meta.requestId,
    };
  }

  /**
   * The one call path (as stripe-node's RequestSender): every operation, every page of a list,
   * every media download and every call of the raw `api` client goes through here, so each of
   * these behaviours exists once.
   *
   * - Signal: each attempt has its own time-out, joined with the caller's `signal`, which also
   *   cuts short the pauses between attempts.
   * - Idempotency-Key: decided here and only here, once per call, before the first attempt: a
   *   reply carries the caller's key (the `idempotencyKey` option, or the header of a raw call)
   *   or a generated UUID, and every attempt sends that same key.
   * - Transport: the body is read once and every attempt sends the same bytes and headers in a
   *   fresh init (a multipart reply keeps its boundary, so the service sees an identical request
   *   and answers a repeat from the first). The whole answer is read within the attempt's
   *   time-out: a stalled body is a time-out, and a connection that drops mid-answer is retried
   *   like one that dropped before it. What is retried, and when: `retryDelayFor` in transport.ts.
   * - Unwrap: `{data}` is returned; an error answer becomes the `ApiError` subclass of its status
   *   (a raw call gets the answer back instead, as openapi-fetch promises).
   * - Metadata: status, `X-Request-Id`, headers, attempts and `Idempotent-Replayed`.
   *
   * `call` is the typed openapi-fetch call; it must send with the `fetch` it is given.
   */
  private async request<D>(
    call: (fetch: (request: Request) => Promise<Response>) => Promise<{ data?: D; error?: unknown; response: Response }>,
    options: ReplyOptions,
    read: { allowEmpty?: boolean; raw?: boolean } = {},
  ): Promise<{ data: D; meta: ResponseMeta }> {
    const { signal } = options;
    const policy = {
      ...this.policy,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.maxRetries !== undefined ? { maxRetries: Math.max(0, Math.floor(options.maxRetries)) } : {}),
    };
    let attempts = 0;

    const send = async (request: Request): Promise<Response> => {
      const headers: Record<string, string> = {};
      request.headers.forEach((value, name) => {
        headers[name] = value;
      });
      if (isReply(request.method, request.url)) {
        headers['idempotency-key'] = options.idempotencyKey ?? headers['idempotency-key'] ?? (await randomUUID());
      }
      const body = request.body ? await request.arrayBuffer() : undefined;
      const origin = new URL(request.url).origin;

      for (;;) {
        attempts++;
        if (signal?.aborted) throw new RequestAbortedError({ cause: signal.reason });
        const controller = new AbortController();
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          controller.abort(new ApiTimeoutError(`No complete answer within ${policy.timeoutMs} ms.`));
        }, policy.timeoutMs);
        const onAbort = () => controller.abort(signal?.reason);
        signal?.addEventListener('abort', onAbort, { once: true });

        let response: Response;
        let bytes: ArrayBuffer | null;
        try {
          response = await this.fetchImpl(request.url, {
            method: request.method,
            headers: { ...headers },
            body,
            signal: controller.signal,
            redirect: 'manual',
          });
          if (isMediaDownload(request.method, request.url)) response = await followMediaRedirect(this.fetchImpl, response, request.url, controller.signal);
          bytes = hasNullBody(response.status) ? null : await response.arrayBuffer();
        } catch (err) {
          if (signal?.aborted) throw new RequestAbortedError({ cause: signal.reason });
          if (attempts <= policy.maxRetries && !isPermanentConnectionFailure(err)) {
            await sleep(backoffMs(policy, attempts), signal);
            continue;
          }
          throw timedOut
            ? new ApiTimeoutError(`No complete answer from ${origin} within ${policy.timeoutMs} ms.`, { cause: err, attempts })
            : new ApiConnectionError(describeConnectionFailure(err, request.url), { cause: err, attempts });
        } finally {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        }

        const delay = attempts <= policy.maxRetries ? retryDelayFor(response, bytes, policy, attempts) : null;
        if (delay === null) return new Response(bytes, { status: response.status, statusText: response.statusText, headers: response.headers });
        await sleep(delay, signal);
      }
    };

    const result = await call(send);
    const { response } = result;
    const meta: ResponseMeta = {
      status: response.status,
      requestId: response.headers.get('x-request-id'),
      headers: response.headers,
      attempts,
      idempotentReplayed: response.headers.get('idempotent-replayed') === 'true',
    };
    if (!read.raw) {
      if (!response.ok) throw toApiError(response, result.error, attempts);
      if (result.data === undefined && !read.allowEmpty) {
        throw ApiError.from({
          status: meta.status,
          code: 'unexpected_response',
          message: `HTTP ${meta.status} with an empty body.`,
          requestId: meta.requestId,
          headers: meta.headers,
          attempts,
        });
      }
    }
    return { data: result.data as D, meta };
  }
}

/**
 * Creates the API client.
 *
 * ```ts
 * const chat = createClient({ apiKey: process.env.CHAT_API_KEY!, baseUrl: 'https://chat.example.com/api/v1' });
 * for await (const c of chat.conversations.list({ state: 'open' })) console.log(c.id);
 * ```
 */
export function createClient(options: ClientOptions): ChatClient {
  return new ChatClient(options);
}
