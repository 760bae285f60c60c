import { loadConfig } from '../config';
import { createLogger } from '../platform/logger';
import { openRuntime } from '../runtime';
import { deliveryWorkerFor } from '../services';
import { onShutdownSignal } from '../platform/shutdown';

/**
 * `npm run worker`: the delivery worker alone, for when the server runs with EMBEDDED_WORKER=false
 * or more delivery capacity is wanted (several on MySQL; on SQLite keep exactly one worker in all).
 * SIGTERM/SIGINT: stop claiming, let the attempts in flight end, exit 0.
 */
async function main() {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const runtime = await openRuntime(config);
  const worker = deliveryWorkerFor(runtime.services, logger.child({ component: 'delivery-worker' }));
  worker.start();
  logger.info({ owner: worker.owner, database: config.databaseUrl ? 'mysql' : 'sqlite' }, 'delivery worker started');

  // Stop claiming, let the attempts in flight end, then close the database.
  onShutdownSignal(logger, 'delivery worker', async () => {
    await worker.stop();
    await runtime.close();
  });
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
