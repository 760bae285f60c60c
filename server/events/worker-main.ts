import { loadConfig } from '../config';
import { createLogger } from '../platform/logger';
import { openRuntime } from '../runtime';
import { createDeliveryWorker } from './worker';

/**
 * `npm run worker`: the delivery worker alone, for when the server runs with EMBEDDED_WORKER=false
 * or more delivery capacity is wanted (several on MySQL; on SQLite keep exactly one worker in all).
 * SIGTERM/SIGINT: stop claiming, let the attempts in flight end, exit 0.
 */
async function main() {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const runtime = await openRuntime(config);
  const worker = createDeliveryWorker({
    db: runtime.db,
    config,
    secretKey: runtime.services.keys.webhookSecrets,
    logger: logger.child({ component: 'delivery-worker' }),
  });
  worker.start();
  logger.info({ owner: worker.owner, database: config.databaseUrl ? 'mysql' : 'sqlite' }, 'delivery worker started');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'delivery worker stopping: finishing attempts in flight');
    await worker.stop();
    await runtime.close();
    logger.info('delivery worker stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
