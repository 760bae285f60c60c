import { loadConfig } from '../config';
import { exitOnStartupFailure } from '../platform/startup';
import { createLogger } from '../platform/logger';
import { openRuntime } from '../runtime';
import { alertCheckWorkerFor, deliveryWorkerFor, mailWorkerFor, replyNoticeWorkerFor } from '../services';
import { onShutdownSignal } from '../platform/shutdown';

/**
 * `npm run worker`: the delivery workers alone (events and email), for when the server runs with EMBEDDED_WORKER=false
 * or more delivery capacity is wanted (several on MySQL; on SQLite keep exactly one worker in all).
 * SIGTERM/SIGINT: stop claiming, let the attempts in flight end, exit 0.
 */
async function main() {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const runtime = await openRuntime(config);
  const worker = deliveryWorkerFor(runtime.services, logger.child({ component: 'delivery-worker' }));
  const mailWorker = mailWorkerFor(runtime.services, logger.child({ component: 'mail-worker' }));
  const noticeWorker = replyNoticeWorkerFor(runtime.services, logger.child({ component: 'reply-notices' }));
  const alertChecks = alertCheckWorkerFor(runtime.services, logger.child({ component: 'alert-checks' }));
  worker.start();
  mailWorker.start();
  noticeWorker.start();
  alertChecks.start();
  logger.info({ owner: worker.owner, database: config.databaseUrl ? 'mysql' : 'sqlite' }, 'delivery worker started');

  // Stop claiming, let the attempts in flight end, then close the database.
  onShutdownSignal(logger, 'delivery worker', async () => {
    await Promise.all([worker.stop(), mailWorker.stop(), noticeWorker.stop(), alertChecks.stop()]);
    await runtime.close();
  });
}

main().catch(exitOnStartupFailure);
