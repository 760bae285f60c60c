import type { Logger } from './logger';

/**
 * SIGTERM/SIGINT run `stop` once (a second signal while stopping is ignored), then exit 0, or 1
 * when stopping failed. Shared by the server and the standalone worker.
 */
export function onShutdownSignal(logger: Logger, what: string, stop: () => Promise<void>): void {
  let stopping = false;
  const run = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, `${what} stopping`);
    try {
      await stop();
      logger.info(`${what} stopped`);
      process.exit(0);
    } catch (err) {
      logger.error({ err }, `${what} did not stop cleanly`);
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void run('SIGTERM'));
  process.on('SIGINT', () => void run('SIGINT'));
}
