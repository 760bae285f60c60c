import path from 'node:path';

/** Runtime configuration, read once from the environment (DECISIONS: Configuration). */
export interface Config {
  port: number;
  dataDir: string;
  databaseUrl: string | undefined;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  publicUrl: string;
  masterKey: string | undefined;
  redisUrl: string | undefined;
  production: boolean;
  logLevel: string;
  rateLimitPerMinute: number;
  maxAttachmentBytes: number;
  mediaLinkTtlSeconds: number;
  webhookAllowPrivateNetworks: boolean;
  webhookCaFile: string | undefined;
  webhookTimeoutMs: number;
  webhookRetryDelaysMs: number[];
  /** Run the delivery worker inside the server process. */
  embeddedWorker: boolean;
  /** Behind a reverse proxy: take the client address from X-Forwarded-For (per-address rate limits). */
  trustProxy: boolean;
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

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = intFrom(env.PORT, 8443, 'PORT');
  const delays = (env.WEBHOOK_RETRY_DELAYS_MS ?? '5000,10000')
    .split(',')
    .map((s) => intFrom(s.trim(), 0, 'WEBHOOK_RETRY_DELAYS_MS'));
  return {
    port,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl: env.DATABASE_URL || undefined,
    tlsCertFile: env.TLS_CERT_FILE || undefined,
    tlsKeyFile: env.TLS_KEY_FILE || undefined,
    publicUrl: (env.PUBLIC_URL || `https://localhost:${port}`).replace(/\/+$/, ''),
    masterKey: env.MASTER_KEY || undefined,
    redisUrl: env.REDIS_URL || undefined,
    production: env.NODE_ENV === 'production',
    logLevel: env.LOG_LEVEL || 'info',
    rateLimitPerMinute: intFrom(env.RATE_LIMIT_PER_MINUTE, 300, 'RATE_LIMIT_PER_MINUTE'),
    maxAttachmentBytes: intFrom(env.MAX_ATTACHMENT_BYTES, 20 * 1024 * 1024, 'MAX_ATTACHMENT_BYTES'),
    mediaLinkTtlSeconds: intFrom(env.MEDIA_LINK_TTL_SECONDS, 3600, 'MEDIA_LINK_TTL_SECONDS'),
    webhookAllowPrivateNetworks: boolFrom(env.WEBHOOK_ALLOW_PRIVATE_NETWORKS),
    webhookCaFile: env.WEBHOOK_CA_FILE || undefined,
    webhookTimeoutMs: intFrom(env.WEBHOOK_TIMEOUT_MS, 20000, 'WEBHOOK_TIMEOUT_MS'),
    webhookRetryDelaysMs: delays,
    embeddedWorker: env.EMBEDDED_WORKER !== 'false',
    trustProxy: boolFrom(env.TRUST_PROXY),
  };
}
