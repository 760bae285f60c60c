import https from 'node:https';
import { loadConfig } from './config';
import { createLogger } from './platform/logger';
import { loadTls } from './platform/tls';
import { createApp } from './app';
import { openRuntime, createLimiter } from './runtime';
import { seedDemo } from './seed';
import { alertCheckWorkerFor, deliveryWorkerFor, mailWorkerFor, replyNoticeWorkerFor } from './services';
import { startMaintenance } from './maintenance';
import { onShutdownSignal } from './platform/shutdown';
import { answerClientErrorsInEnvelope } from './http/client-errors';
import { exitOnStartupFailure, StartupError } from './platform/startup';
import { checkReadiness } from './platform/readiness';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS } from './platform/redis';
import Redis from 'ioredis';

/** `npm start`: HTTPS only (no plaintext listener), migrations first, graceful shutdown on SIGTERM. */
async function main() {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const runtime = await openRuntime(config);
  const { services, db } = runtime;

  if (!config.databaseUrl && !config.production) {
    const demo = await seedDemo(services);
    if (demo) {
      // Printed once, to the terminal only; it is not stored anywhere in clear.
      process.stdout.write(
        `\nDemo site ${demo.siteId} created with a few conversations.\nDemo API key (shown once, keep it): ${demo.key}\n` +
          `Try it: https://localhost:${config.port}/docs/ (Authorize with the key)\n\n`,
      );
    }
  }

  // The first owner: while no account exists, every start prints a new one-time link (the older
  // one stops). Only its hash is stored; the token is in the fragment, out of access logs.
  const setup = await services.accounts.setup.issueLink();
  if (setup) {
    process.stdout.write(
      `\nNo account exists yet. Make the first owner (of every site) with this one-time link, valid until ${setup.expiresAt}:\n\n  ${setup.url}\n\n` +
        `Any account made another way (npm run admin -- account create) ends it; a restart prints a new one.\n\n`,
    );
  }

  const tls = await loadTls(config.dataDir, config.tlsCertFile, config.tlsKeyFile);
  if (tls.generatedAt) logger.warn({ cert: tls.generatedAt }, 'no TLS certificate configured: generated a self-signed one for localhost');

  const limiter = createLimiter(config, logger.child({ component: 'rate-limit' }));
  // A connection of its own for /readyz, failing fast like the others: a probe never waits on a reconnect.
  const readinessRedis = config.redisUrl ? new Redis(config.redisUrl, FAIL_FAST_REDIS_OPTIONS) : undefined;
  readinessRedis?.on('error', () => {}); // reported by /readyz and the limiter's own log, not once per reconnect
  const app = createApp({
    services,
    logger,
    limiter,
    validateResponses: !config.production,
    ready: () => checkReadiness({ db, redis: readinessRedis, blobs: services.blobs }),
  });
  const limits = config.http;
  const server = https.createServer(
    {
      cert: tls.cert,
      key: tls.key,
      handshakeTimeout: limits.tlsHandshakeTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // A missing Host is refused by the app (http/headers.ts), in the envelope, not by Node with an empty 400.
      requireHostHeader: false,
      // Node checks the headers and request time-outs on this tick (30 s by default), so a slow
      // client would otherwise hold its connection up to 30 s past its time-out.
      connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
    },
    app,
  );
  // No 'timeout' listener: Node destroys a socket idle this long (a client that stopped reading a download).
  server.setTimeout(limits.socketIdleTimeoutMs);
  server.maxConnections = limits.maxConnections;
  answerClientErrorsInEnvelope(server);
  let droppedSince = 0;
  server.on('drop', () => {
    // Logged at most once a minute: a flood must not turn into a flood of log lines.
    if (Date.now() - droppedSince > 60_000) {
      droppedSince = Date.now();
      logger.warn({ maxConnections: limits.maxConnections }, 'connection cap reached: dropping new connections');
    }
  });

  // The delivery worker runs here unless EMBEDDED_WORKER=false (then run `npm run worker` beside it);
  // the delivery-log retention is the maintenance's here.
  const worker = config.embeddedWorker ? deliveryWorkerFor(services, logger.child({ component: 'delivery-worker' }), { logRetention: false }) : null;
  const mailWorker = config.embeddedWorker ? mailWorkerFor(services, logger.child({ component: 'mail-worker' })) : null;
  const noticeWorker = config.embeddedWorker ? replyNoticeWorkerFor(services, logger.child({ component: 'reply-notices' })) : null;
  const alertChecks = config.embeddedWorker ? alertCheckWorkerFor(services, logger.child({ component: 'alert-checks' })) : null;

  const windowUrl = `${config.windowPublicUrl ?? config.publicUrl}/window/v1/loader.js`;
  await listen(server, config.port);
  // Only once listening: a start that fails on its port leaves no delivery claimed by a process about to exit.
  worker?.start();
  mailWorker?.start();
  noticeWorker?.start();
  alertChecks?.start();
  logger.info({ port: config.port, url: `${config.publicUrl}/api/v1`, docs: `${config.publicUrl}/docs/`, window: windowUrl }, 'listening (HTTPS)');

  const maintenance = startMaintenance(services, logger.child({ component: 'maintenance' }));

  onShutdownSignal(logger, 'server', async () => {
    // Stop accepting, let in-flight requests finish (25 s at most), then the worker, then the database.
    const force = setTimeout(() => {
      logger.warn('in-flight requests did not finish in 25 s; closing anyway');
      server.closeAllConnections();
    }, 25_000);
    force.unref();
    server.closeIdleConnections();
    // Live streams of the chat window never end by themselves; the window reconnects with Last-Event-ID.
    services.window.streams.closeAll();
    services.inbox.streams.closeAll();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    maintenance.stop();
    await Promise.all([worker?.stop(), mailWorker?.stop(), noticeWorker?.stop(), alertChecks?.stop()]);
    await limiter.close?.();
    if (readinessRedis) await closeRedis(readinessRedis);
    await runtime.close();
  });
}

/** Listens, or fails with one line naming PORT when the port is taken or not ours to bind. */
function listen(server: https.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(new StartupError(`PORT=${port} is in use by another process: stop it (ss -ltnp 'sport = :${port}' shows which) or set PORT to a free port`));
      } else if (err.code === 'EACCES') {
        reject(
          new StartupError(
            `PORT=${port} may not be bound by this user (ports below 1024 need privileges): set PORT=8443 and forward 443 to it, or grant CAP_NET_BIND_SERVICE`,
          ),
        );
      } else reject(err);
    };
    server.once('error', failed);
    server.listen(port, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

main().catch(exitOnStartupFailure);
