import type { Knex } from 'knex';
import Redis from 'ioredis';
import { Config } from './config';
import { createDb, migrate, waitForDatabase } from './db/knex';
import { loadMasterKey, masterKeyFile } from './platform/master-key';
import { checkMasterKey } from './platform/master-key-check';
import { checkDataDir } from './platform/startup';
import { createServices, Services } from './services';
import { createMemoryLimiter, RateLimiter } from './http/rate-limit/limiter';
import { createFailOpenLimiter } from './http/rate-limit/fail-open';
import { FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from './platform/redis';
import { createLogger, Logger } from './platform/logger';
import { createEventChannel } from './delivery/channel';
import { createStreamLeases } from './window/stream-leases';
import { STREAM_LEASE_MS } from './window/streams';
import { createRedisPresence } from './inbox/presence';
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

export interface RuntimeOptions {
  onEvents?: () => void;
  now?: () => number;
  passwordHasher?: PasswordHasher;
  /** Where start-up waits are told (the CLI's go to stderr, so its --json output stays clean). */
  logger?: Logger;
}

export async function openRuntime(config: Config, opts: RuntimeOptions = {}): Promise<Runtime> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  checkDataDir(config.dataDir);
  const db = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await waitForDatabase(db, {
      timeoutSeconds: config.databaseConnectTimeoutSeconds,
      onRetry: ({ attempt, reason, retryInMs, where }) =>
        logger.warn(
          { attempt, reason, retryInMs, giveUpAfterSeconds: config.databaseConnectTimeoutSeconds },
          `waiting for the database: ${where} does not answer yet (${reason}); trying again in ${retryInMs} ms (DATABASE_CONNECT_TIMEOUT_SECONDS)`,
        ),
    });
    const { newer } = await migrate(db);
    if (newer.length) {
      logger.warn(
        { newerMigrations: newer },
        `the database has ${newer.length} migration(s) of a newer release; this release runs on it (each migration is safe with the release before it): upgrade this instance`,
      );
    }
    const master = loadMasterKey(config.dataDir, config.masterKey);
    await checkMasterKey(db, master, { fromEnv: Boolean(config.masterKey), file: masterKeyFile(config.dataDir) });
    return openServices(config, db, master, logger, opts);
  } catch (err) {
    await db.destroy();
    throw err;
  }
}

function openServices(config: Config, db: Knex, master: Buffer, logger: Logger, opts: RuntimeOptions): Runtime {
  const channel = createEventChannel({ redisUrl: config.redisUrl, logger: logger.child({ component: 'event-channel' }) });
  // The process's one bound on password hashes (no thread starts before the first one).
  const hashPool = createHashPool({ ...config.passwordHashing, logger: logger.child({ component: 'password-hash' }) });
  const passwordHasher = opts.passwordHasher ?? createPasswordHasher(undefined, hashPool);
  // Per-holder and per-address stream limits hold across instances; each process still bounds its own total.
  const streamLeases = config.redisUrl
    ? createStreamLeases({ redisUrl: config.redisUrl, leaseMs: STREAM_LEASE_MS, logger: logger.child({ component: 'live-streams' }) })
    : undefined;
  const presence = config.redisUrl
    ? createRedisPresence({ redisUrl: config.redisUrl, ttlMs: STREAM_LEASE_MS, logger: logger.child({ component: 'inbox-presence' }) })
    : undefined;
  const services = createServices(db, config, master, { ...opts, channel, passwordHasher, streamLeases, presence });
  return {
    config,
    db,
    services,
    close: async () => {
      await services.idempotency.flushReplayNotes(); // the replays answered last still reach the timeline
      await channel.close();
      await streamLeases?.close();
      await presence?.close();
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
