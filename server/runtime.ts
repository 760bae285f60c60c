import type { Knex } from 'knex';
import Redis from 'ioredis';
import { Config } from './config';
import { createDb, migrate } from './db/knex';
import { loadMasterKey } from './platform/master-key';
import { createServices, Services } from './services';
import { createMemoryLimiter, createRedisLimiter, RateLimiter } from './http/rate-limit/limiter';

/** What the server, the worker and the CLI share: config, a migrated database and the services. */
export interface Runtime {
  config: Config;
  db: Knex;
  services: Services;
  close(): Promise<void>;
}

export async function openRuntime(config: Config, opts: { onEvents?: () => void; now?: () => number } = {}): Promise<Runtime> {
  const db = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(db);
  const master = loadMasterKey(config.dataDir, config.masterKey);
  const services = createServices(db, config, master, opts);
  return { config, db, services, close: () => db.destroy() };
}

export function createLimiter(config: Config): RateLimiter {
  if (!config.redisUrl) return createMemoryLimiter(config.rateLimitPerMinute);
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
  return createRedisLimiter(redis, config.rateLimitPerMinute);
}
