import type { Knex } from 'knex';
import Redis from 'ioredis';
import { Config } from './config';
import { createDb, migrate } from './db/knex';
import { loadMasterKey } from './platform/master-key';
import { createServices, Services } from './services';
import { createMemoryLimiter, RateLimiter } from './http/rate-limit/limiter';
import { createFailOpenLimiter } from './http/rate-limit/fail-open';
import { FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from './platform/redis';
import { createLogger, Logger } from './platform/logger';
import { createEventChannel } from './webhooks/channel';
import { createPasswordHasher, PasswordHasher } from './accounts/passwords';
import { createHashPool } from './accounts/hash-pool';

/**
 * What the server, the worker and the CLI share: config, a migrated database, the services and the
 * event channel that tells delivery workers and the chat window's live streams of committed events
 * (in every process, through Redis when REDIS_URL is set), so a reply made by the CLI or another
 * instance is delivered, and shown in an open chat window, at once too.
 */
export interface Runtime {
  config: Config;
  db: Knex;
  services: Services;
  close(): Promise<void>;
}

export async function openRuntime(config: Config, opts: { onEvents?: () => void; now?: () => number; passwordHasher?: PasswordHasher } = {}): Promise<Runtime> {
  const db = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(db);
  const master = loadMasterKey(config.dataDir, config.masterKey);
  const logger = createLogger(config.logLevel);
  const channel = createEventChannel({ redisUrl: config.redisUrl, logger: logger.child({ component: 'event-channel' }) });
  // The process's one bound on password hashes (no thread starts before the first one).
  const hashPool = createHashPool({ ...config.passwordHashing, logger: logger.child({ component: 'password-hash' }) });
  const passwordHasher = opts.passwordHasher ?? createPasswordHasher(undefined, hashPool);
  const services = createServices(db, config, master, { ...opts, channel, passwordHasher });
  return {
    config,
    db,
    services,
    close: async () => {
      await services.idempotency.flushReplayNotes(); // the replays answered last still reach the timeline
      await channel.close();
      await hashPool.close();
      await db.destroy();
    },
  };
}

/**
 * In-process limits, or with REDIS_URL limits shared across instances that fall back to in-process
 * ones while Redis is unreachable (never a 500, never a wait behind a reconnect).
 */
export function createLimiter(config: Config, logger: Logger = createLogger(config.logLevel)): RateLimiter {
  if (!config.redisUrl) return createMemoryLimiter(config.rateLimitPerMinute);
  const redis = new Redis(config.redisUrl, FAIL_FAST_REDIS_OPTIONS);
  return createFailOpenLimiter(redis, { limit: config.rateLimitPerMinute, logger, secrets: redisUrlSecrets(config.redisUrl) });
}
