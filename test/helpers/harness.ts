import https from 'node:https';
import { checkReadiness } from '../../server/platform/readiness';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { loadConfig, Config } from '../../server/config';
import { createApp } from '../../server/app';
import { openRuntime, Runtime } from '../../server/runtime';
import { createLogger } from '../../server/platform/logger';
import { createMemoryLimiter, RateLimiter } from '../../server/http/rate-limit/limiter';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { createTestDatabase, TestDatabase } from './db';
import type { Scope } from '../../server/access/scopes';
import type { PasswordHasher } from '../../server/accounts/passwords';

export const ALL_SCOPES: Scope[] = ['conversations:read', 'conversations:write', 'media:read'];

export interface Harness {
  app: Express;
  runtime: Runtime;
  config: Config;
  database: TestDatabase;
  limiter: RateLimiter;
  /** A site with a key holding every right. */
  site: { id: string; key: string; keyId: string };
  newSite(name?: string): Promise<{ id: string; key: string; keyId: string }>;
  newKey(siteId: string, scopes: Scope[]): Promise<{ id: string; key: string }>;
  /** A visitor writes through the chat window's path. */
  visitorSay(siteId: string, visitorId: string, content: string): ReturnType<Runtime['services']['window']['chat']['visitorSay']>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  limiter?: RateLimiter;
  now?: () => number;
  onEvents?: () => void;
  /** Password hashing for the accounts (cheaper scrypt parameters keep sign-in tests quick). */
  passwordHasher?: PasswordHasher;
}

/** The real app (response validation on) on a fresh database, for supertest. */
export async function createHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const database = await createTestDatabase();
  const config = loadConfig({
    DATA_DIR: database.dataDir,
    DATABASE_URL: database.databaseUrl,
    PUBLIC_URL: 'https://localhost:8443',
    LOG_LEVEL: 'silent',
    ...opts.env,
  } as NodeJS.ProcessEnv);
  const runtime = await openRuntime(config, { now: opts.now, onEvents: opts.onEvents, passwordHasher: opts.passwordHasher });
  const limiter = opts.limiter ?? createMemoryLimiter(config.rateLimitPerMinute, opts.now);
  const app = createApp({
    services: runtime.services,
    logger: createLogger('silent'),
    limiter,
    validateResponses: true,
    ready: () => checkReadiness({ db: runtime.db, blobs: runtime.services.blobs }),
  });
  const newKey = (siteId: string, scopes: Scope[]) => runtime.services.access.createKey(siteId, scopes);
  const newSite = async (name = 'Test site') => {
    const s = await runtime.services.access.createSite(name);
    const k = await newKey(s.id, ALL_SCOPES);
    return { id: s.id, key: k.key, keyId: k.id };
  };
  const site = await newSite();
  return {
    app,
    runtime,
    config,
    database,
    limiter,
    site,
    newSite,
    newKey,
    visitorSay: (siteId, visitorId, content) => runtime.services.window.chat.visitorSay(siteId, visitorId, content),
    close: async () => {
      await runtime.close();
      await database.drop();
    },
  };
}

/** The same app behind a real HTTPS listener on a random port (self-signed certificate). */
export async function listenHttps(app: Express): Promise<{ url: string; ca: string; close(): Promise<void> }> {
  const tls = await makeSelfSignedCert();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://localhost:${port}`,
    ca: tls.cert,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
