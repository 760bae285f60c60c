import path from 'node:path';
import type { VisitorFileLimits } from './media/quota';
import type { S3StoreOptions } from './media/s3-store';
import { DEFAULT_HASH_QUEUE, defaultHashThreads, MAX_HASH_THREADS } from './accounts/hash-pool';

/** Runtime configuration, read once from the environment (every setting is listed in README.md, Configuration). */
export interface Config {
  port: number;
  dataDir: string;
  databaseUrl: string | undefined;
  /** How long a start waits for MySQL/MariaDB to answer, retrying with growing pauses, before it gives up. */
  databaseConnectTimeoutSeconds: number;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  publicUrl: string;
  /**
   * The chat window's own origin (its loader, panel, entry and the visitors' file links), answered by
   * this process when a request's Host names it; undefined: the window is served under publicUrl.
   */
  windowPublicUrl: string | undefined;
  /** Swagger UI keeps the key entered under Authorize in the browser's localStorage (opt-in). */
  docsPersistAuthorization: boolean;
  masterKey: string | undefined;
  redisUrl: string | undefined;
  production: boolean;
  logLevel: string;
  rateLimitPerMinute: number;
  maxAttachmentBytes: number;
  mediaLinkTtlSeconds: number;
  /** How long an agent's reply waits for the window to show it before it is emailed to the visitor (docs/email.md). */
  replyEmailDelaySeconds: number;
  webhookAllowPrivateNetworks: boolean;
  webhookCaFile: string | undefined;
  webhookTimeoutMs: number;
  webhookRetryDelaysMs: number[];
  /** Delivery attempts one worker keeps in flight at once, over all addresses. */
  webhookConcurrency: number;
  /** Of those, at most this many to any one address, so one slow receiver cannot take every slot. */
  webhookMaxInFlightPerAddress: number;
  /** Run the delivery worker inside the server process. */
  embeddedWorker: boolean;
  /**
   * Which hops of X-Forwarded-For to believe, in Express's `trust proxy` terms: `false` (direct, the
   * socket's peer IP), a hop count, or the proxies' IPs, subnets and names.
   */
  trustProxy: TrustProxy;
  /** HTTPS listener limits against slow and abandoned clients (docs/operations.md, Failure behaviour). */
  http: HttpLimits;
  /** Quotas on what the chat window's visitors send (docs/window.md, Visitor files); 0 turns one off. */
  visitorFiles: VisitorFileLimits;
  /** Where media bytes live (MEDIA_STORE and the MEDIA_S3_* settings) and how downloads are answered (MEDIA_DOWNLOAD). */
  media: MediaStorage;
  /** Media files (and their attachment rows) older than this are removed by maintenance; 0 keeps them. */
  mediaRetentionDays: number;
  /** The chat window's reports of a visitor's pages and browser older than this are removed by maintenance; 0 keeps them. */
  visitorContextRetentionDays: number;
  /** Password hashing's own threads and queue (docs/operations.md, Sign-in floods). */
  passwordHashing: PasswordHashing;
  /** Outgoing email (docs/email.md). */
  mail: MailSettings;
}

export interface MailSettings {
  /** `smtp://` or `smtps://` relay; undefined: each email is written as an .eml file under DATA_DIR/mail/. */
  smtpUrl: string | undefined;
  smtpUser: string | undefined;
  smtpPassword: string | undefined;
  /** The From of every email. */
  from: string;
}

/**
 * `local`: DATA_DIR/media, streamed by us. `s3`: a bucket, answered by a redirect to a short-lived
 * presigned URL or streamed through us.
 */
export type MediaStorage = { store: 'local'; download: 'stream' } | { store: 's3'; s3: S3StoreOptions; download: 'redirect' | 'stream' };

export interface PasswordHashing {
  /** Hashes at once, each on a thread of its own with 128 MiB while it runs. */
  threads: number;
  /** Hashes waiting for a thread; one more is answered 503 with Retry-After. */
  queue: number;
}

export interface HttpLimits {
  /** A TLS handshake not finished by then is dropped (Node's default is 120 s). */
  tlsHandshakeTimeoutMs: number;
  /** The request line and headers must arrive within this (slow-header clients). */
  headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this (slow uploads). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** A connection with no traffic either way (a client that stopped reading) is closed after this. */
  socketIdleTimeoutMs: number;
  /** Connections beyond this are dropped at once, so descriptors and memory stay bounded. */
  maxConnections: number;
}

export type TrustProxy = false | number | string[];

// proxy-addr (Express's own parser for `trust proxy`) ships no types; only its validation is used.
const proxyAddr = require('proxy-addr') as { compile(trusted: string[]): unknown };

/**
 * TRUST_PROXY takes what Express's `trust proxy` takes, except `true`: trusting every hop lets any
 * client write its own IP into X-Forwarded-For, which defeats the per-client-IP limits.
 */
export function trustProxyFrom(value: string | undefined): TrustProxy {
  const v = (value ?? '').trim();
  if (v === '' || v.toLowerCase() === 'false') return false;
  if (v.toLowerCase() === 'true') {
    throw new Error(
      'TRUST_PROXY=true is refused: it would trust every X-Forwarded-For entry, so any client could choose its own IP and escape the per-client-IP limits. ' +
        "Give the number of proxy hops in front of the service (TRUST_PROXY=1 for one reverse proxy) or the proxies' IPs (TRUST_PROXY=loopback, or TRUST_PROXY=10.0.0.0/8,172.16.0.0/12).",
    );
  }
  if (/^\d+$/.test(v)) {
    const hops = Number(v);
    if (hops > 100) throw new Error(`TRUST_PROXY must be a hop count of at most 100 or a list of proxy IPs, got "${v}"`);
    return hops === 0 ? false : hops;
  }
  const trusted = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  try {
    proxyAddr.compile(trusted);
  } catch (err) {
    throw new Error(`TRUST_PROXY must be a hop count or a comma-separated list of IPs, subnets or loopback/linklocal/uniquelocal: ${(err as Error).message}`);
  }
  return trusted;
}

function intFrom(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${value}"`);
  return n;
}

function boolFrom(value: string | undefined): boolean {
  return value === 'true' || value === '1';
}

/**
 * WINDOW_PUBLIC_URL: an https origin on a host name of its own, so the window's pages and the
 * visitors' files never share an origin (and its localStorage) with Swagger UI and the API.
 */
export function windowPublicUrlFrom(value: string | undefined, publicUrl: string): string | undefined {
  const v = (value ?? '').trim();
  if (v === '') return undefined;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new Error(`WINDOW_PUBLIC_URL must be an https URL such as https://chat-window.example.net, got "${v}"`);
  }
  if (url.protocol !== 'https:' || url.username || url.password || url.search || url.hash || url.pathname !== '/') {
    throw new Error(`WINDOW_PUBLIC_URL must be an https origin without path, query or credentials (https://chat-window.example.net), got "${v}"`);
  }
  if (url.hostname === new URL(publicUrl).hostname) {
    throw new Error(`WINDOW_PUBLIC_URL must name another host than PUBLIC_URL (${publicUrl}): the process tells the two apart by the Host header`);
  }
  return url.origin;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = intFrom(env.PORT, 8443, 'PORT');
  if (port < 1 || port > 65535) throw new Error(`PORT must be a TCP port from 1 to 65535, got "${env.PORT}"`);
  const publicUrl = (env.PUBLIC_URL || `https://localhost:${port}`).replace(/\/+$/, '');
  const delays = (env.WEBHOOK_RETRY_DELAYS_MS ?? '5000,10000').split(',').map((s) => intFrom(s.trim(), 0, 'WEBHOOK_RETRY_DELAYS_MS'));
  return {
    port,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl: env.DATABASE_URL || undefined,
    databaseConnectTimeoutSeconds: intFrom(env.DATABASE_CONNECT_TIMEOUT_SECONDS, 60, 'DATABASE_CONNECT_TIMEOUT_SECONDS'),
    tlsCertFile: env.TLS_CERT_FILE || undefined,
    tlsKeyFile: env.TLS_KEY_FILE || undefined,
    publicUrl,
    windowPublicUrl: windowPublicUrlFrom(env.WINDOW_PUBLIC_URL, publicUrl),
    docsPersistAuthorization: boolFrom(env.DOCS_PERSIST_AUTHORIZATION),
    masterKey: env.MASTER_KEY || undefined,
    redisUrl: env.REDIS_URL || undefined,
    production: env.NODE_ENV === 'production',
    logLevel: env.LOG_LEVEL || 'info',
    rateLimitPerMinute: intFrom(env.RATE_LIMIT_PER_MINUTE, 300, 'RATE_LIMIT_PER_MINUTE'),
    maxAttachmentBytes: intFrom(env.MAX_ATTACHMENT_BYTES, 20 * 1024 * 1024, 'MAX_ATTACHMENT_BYTES'),
    mediaLinkTtlSeconds: intFrom(env.MEDIA_LINK_TTL_SECONDS, 3600, 'MEDIA_LINK_TTL_SECONDS'),
    replyEmailDelaySeconds: intFrom(env.REPLY_EMAIL_DELAY_SECONDS, 300, 'REPLY_EMAIL_DELAY_SECONDS'),
    webhookAllowPrivateNetworks: boolFrom(env.WEBHOOK_ALLOW_PRIVATE_NETWORKS),
    webhookCaFile: env.WEBHOOK_CA_FILE || undefined,
    webhookTimeoutMs: intFrom(env.WEBHOOK_TIMEOUT_MS, 20000, 'WEBHOOK_TIMEOUT_MS'),
    webhookRetryDelaysMs: delays,
    ...deliveryLimitsFrom(env),
    embeddedWorker: env.EMBEDDED_WORKER !== 'false',
    trustProxy: trustProxyFrom(env.TRUST_PROXY),
    http: httpLimitsFrom(env),
    visitorFiles: visitorFileLimitsFrom(env),
    media: mediaStorageFrom(env),
    mediaRetentionDays: intFrom(env.MEDIA_RETENTION_DAYS, 90, 'MEDIA_RETENTION_DAYS'),
    visitorContextRetentionDays: intFrom(env.VISITOR_CONTEXT_RETENTION_DAYS, 90, 'VISITOR_CONTEXT_RETENTION_DAYS'),
    passwordHashing: passwordHashingFrom(env),
    mail: mailSettingsFrom(env, publicUrl),
  };
}

/** MEDIA_STORE and its settings; a wrong value is one line naming the setting and what it takes. */
export function mediaStorageFrom(env: NodeJS.ProcessEnv): MediaStorage {
  const store = env.MEDIA_STORE || 'local';
  const download = env.MEDIA_DOWNLOAD || undefined;
  if (download !== undefined && download !== 'redirect' && download !== 'stream')
    throw new Error(`MEDIA_DOWNLOAD must be redirect or stream, got "${download}"`);
  if (store === 'local') {
    if (download === 'redirect') throw new Error('MEDIA_DOWNLOAD=redirect needs MEDIA_STORE=s3: files on local disk are streamed; unset MEDIA_DOWNLOAD');
    return { store: 'local', download: 'stream' };
  }
  if (store !== 's3') throw new Error(`MEDIA_STORE must be local or s3, got "${store}"`);
  const bucket = (env.MEDIA_S3_BUCKET ?? '').trim();
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new Error(`MEDIA_S3_BUCKET must name the bucket (3 to 63 lowercase letters, digits, dots and hyphens) when MEDIA_STORE=s3, got "${bucket}"`);
  const endpoint = (env.MEDIA_S3_ENDPOINT ?? '').trim() || undefined;
  if (endpoint !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    // Never echoed when it carries credentials: start-up errors end up in logs.
    if (url && (url.username || url.password))
      throw new Error('MEDIA_S3_ENDPOINT must be an http(s) URL without credentials: give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:'))
      throw new Error(`MEDIA_S3_ENDPOINT must be an http(s) URL without credentials such as https://minio.example.net:9000, got "${endpoint}"`);
  }
  const pathStyle = env.MEDIA_S3_FORCE_PATH_STYLE || 'false';
  if (pathStyle !== 'true' && pathStyle !== 'false') throw new Error(`MEDIA_S3_FORCE_PATH_STYLE must be true or false, got "${pathStyle}"`);
  const prefix = env.MEDIA_S3_PREFIX ?? '';
  if (!/^[A-Za-z0-9!_.*'()/-]{0,200}$/.test(prefix) || prefix.startsWith('/'))
    throw new Error(`MEDIA_S3_PREFIX must be up to 200 letters, digits and !_.*'()/- not starting with /, such as chat/media/, got "${prefix}"`);
  const timeoutMs = intFrom(env.MEDIA_S3_TIMEOUT_MS, 10_000, 'MEDIA_S3_TIMEOUT_MS');
  if (timeoutMs < 100) throw new Error(`MEDIA_S3_TIMEOUT_MS must be at least 100, got ${timeoutMs}`);
  const region = (env.MEDIA_S3_REGION ?? '').trim() || 'us-east-1';
  if (!/^[a-z0-9-]{1,64}$/.test(region)) throw new Error(`MEDIA_S3_REGION must be a region name such as eu-west-1, got "${region}"`);
  return {
    store: 's3',
    s3: { bucket, region, endpoint, forcePathStyle: pathStyle === 'true', prefix, timeoutMs },
    download: download ?? 'redirect',
  };
}

function mailSettingsFrom(env: NodeJS.ProcessEnv, publicUrl: string): MailSettings {
  const smtpUrl = env.SMTP_URL || undefined;
  if (smtpUrl) {
    let url: URL;
    try {
      url = new URL(smtpUrl);
    } catch {
      throw new Error('SMTP_URL must be a URL such as smtps://relay.example.com:465 or smtp://localhost:25');
    }
    if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw new Error(`SMTP_URL must start with smtp:// or smtps://, got ${url.protocol}//`);
    if (!url.hostname) throw new Error('SMTP_URL must name the relay host, as in smtp://localhost:25');
  }
  const from = env.MAIL_FROM || `Chat service <no-reply@${new URL(publicUrl).hostname}>`;
  // Only the address's shape: the relay decides whether it may send as it.
  if (!/^(?:[^<>\r\n]*<[^<>@\s]+@[^<>@\s]+>|[^<>@\s]+@[^<>@\s]+)$/.test(from.trim())) {
    throw new Error(`MAIL_FROM must be an address, as in "Support <support@example.com>" or support@example.com`);
  }
  return { smtpUrl, smtpUser: env.SMTP_USER || undefined, smtpPassword: env.SMTP_PASSWORD || undefined, from: from.trim() };
}

function passwordHashingFrom(env: NodeJS.ProcessEnv): PasswordHashing {
  const threads = intFrom(env.PASSWORD_HASH_THREADS, defaultHashThreads(), 'PASSWORD_HASH_THREADS');
  // Each thread holds 128 MiB while it hashes: the cap bounds that memory, and more threads than
  // cores would only slow the event loop.
  if (threads < 1 || threads > MAX_HASH_THREADS) throw new Error(`PASSWORD_HASH_THREADS must be 1 to ${MAX_HASH_THREADS}, got ${threads}`);
  const queue = intFrom(env.PASSWORD_HASH_QUEUE, DEFAULT_HASH_QUEUE, 'PASSWORD_HASH_QUEUE');
  if (queue > 1000) throw new Error(`PASSWORD_HASH_QUEUE must be at most 1000, got ${queue}`);
  return { threads, queue };
}

function deliveryLimitsFrom(env: NodeJS.ProcessEnv): Pick<Config, 'webhookConcurrency' | 'webhookMaxInFlightPerAddress'> {
  const webhookConcurrency = intFrom(env.WEBHOOK_CONCURRENCY, 16, 'WEBHOOK_CONCURRENCY');
  const webhookMaxInFlightPerAddress = intFrom(env.WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS, 4, 'WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS');
  // 0 would stop delivery altogether; a per-address cap above the total could never be reached.
  if (webhookConcurrency < 1) throw new Error(`WEBHOOK_CONCURRENCY must be at least 1, got ${webhookConcurrency}`);
  if (webhookMaxInFlightPerAddress < 1) throw new Error(`WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS must be at least 1, got ${webhookMaxInFlightPerAddress}`);
  if (webhookMaxInFlightPerAddress > webhookConcurrency) {
    throw new Error(`WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS (${webhookMaxInFlightPerAddress}) must not exceed WEBHOOK_CONCURRENCY (${webhookConcurrency})`);
  }
  return { webhookConcurrency, webhookMaxInFlightPerAddress };
}

function httpLimitsFrom(env: NodeJS.ProcessEnv): HttpLimits {
  const limits: HttpLimits = {
    tlsHandshakeTimeoutMs: intFrom(env.TLS_HANDSHAKE_TIMEOUT_MS, 10_000, 'TLS_HANDSHAKE_TIMEOUT_MS'),
    headersTimeoutMs: intFrom(env.HTTP_HEADERS_TIMEOUT_MS, 15_000, 'HTTP_HEADERS_TIMEOUT_MS'),
    // 10 files of 20 MiB need about 5.6 Mbit/s to arrive in 5 minutes.
    requestTimeoutMs: intFrom(env.HTTP_REQUEST_TIMEOUT_MS, 300_000, 'HTTP_REQUEST_TIMEOUT_MS'),
    // Above the 60 s idle time-out of common load balancers, so they never reuse a connection we just closed.
    keepAliveTimeoutMs: intFrom(env.HTTP_KEEPALIVE_TIMEOUT_MS, 65_000, 'HTTP_KEEPALIVE_TIMEOUT_MS'),
    socketIdleTimeoutMs: intFrom(env.HTTP_SOCKET_IDLE_TIMEOUT_MS, 120_000, 'HTTP_SOCKET_IDLE_TIMEOUT_MS'),
    maxConnections: intFrom(env.HTTP_MAX_CONNECTIONS, 1000, 'HTTP_MAX_CONNECTIONS'),
  };
  // Node refuses a headers time-out above the request time-out; 0 would switch either off.
  for (const [name, value] of [
    ['TLS_HANDSHAKE_TIMEOUT_MS', limits.tlsHandshakeTimeoutMs],
    ['HTTP_HEADERS_TIMEOUT_MS', limits.headersTimeoutMs],
    ['HTTP_REQUEST_TIMEOUT_MS', limits.requestTimeoutMs],
    ['HTTP_KEEPALIVE_TIMEOUT_MS', limits.keepAliveTimeoutMs],
    ['HTTP_SOCKET_IDLE_TIMEOUT_MS', limits.socketIdleTimeoutMs],
    ['HTTP_MAX_CONNECTIONS', limits.maxConnections],
  ] as const) {
    if (value < 1) throw new Error(`${name} must be at least 1, got ${value}`);
  }
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new Error(`HTTP_HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`);
  }
  return limits;
}

const MIB = 1024 * 1024;

function visitorFileLimitsFrom(env: NodeJS.ProcessEnv): VisitorFileLimits {
  return {
    messagesPerHourPerClientIp: intFrom(env.VISITOR_MESSAGES_PER_HOUR_PER_ADDRESS, 1000, 'VISITOR_MESSAGES_PER_HOUR_PER_ADDRESS'),
    bytesPerHourPerClientIp: intFrom(env.VISITOR_FILE_BYTES_PER_HOUR_PER_ADDRESS, 200 * MIB, 'VISITOR_FILE_BYTES_PER_HOUR_PER_ADDRESS'),
    bytesPerDayPerSite: intFrom(env.VISITOR_FILE_BYTES_PER_DAY_PER_SITE, 1024 * MIB, 'VISITOR_FILE_BYTES_PER_DAY_PER_SITE'),
    storedBytesPerSite: intFrom(env.VISITOR_FILE_BYTES_PER_SITE, 10 * 1024 * MIB, 'VISITOR_FILE_BYTES_PER_SITE'),
  };
}
