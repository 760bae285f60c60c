import type { Logger } from '../platform/logger';
import type { EventStore } from './store';
import type { DeliveryWorker } from './worker';

const HOUR = 3600_000;
/** The delivery log's retention: attempt rows, finished deliveries and unredeliverable events. */
export const DELIVERY_LOG_RETENTION_MS = 30 * 24 * HOUR;

/**
 * Removes what the delivery log keeps no longer than 30 days before `now` (runMaintenance's step),
 * and drops the old secrets of planned rolls whose switch has come (they sign nothing any more).
 */
export async function removeExpiredDeliveryLog(store: Pick<EventStore, 'removeOlderThan' | 'completeSwitches'>, now: number) {
  await store.completeSwitches(now);
  return store.removeOlderThan(now - DELIVERY_LOG_RETENTION_MS);
}

/**
 * A delivery worker that also runs the delivery-log retention, at its start and every hour, for
 * processes where the server's maintenance (server/maintenance.ts) does not run: `npm run worker`.
 * The step is idempotent, so it may run in several processes at once.
 */
export function withDeliveryLogRetention(
  worker: DeliveryWorker,
  store: Pick<EventStore, 'removeOlderThan' | 'completeSwitches'>,
  logger: Pick<Logger, 'info' | 'warn'>,
  everyMs = HOUR,
): DeliveryWorker {
  let timer: NodeJS.Timeout | undefined;
  const run = async () => {
    try {
      const removed = await removeExpiredDeliveryLog(store, Date.now());
      if (removed.attempts || removed.deliveries || removed.events) logger.info({ removed }, 'event delivery: removed log rows older than 30 days');
    } catch (err) {
      logger.warn({ err: { message: (err as Error).message } }, 'event delivery: cleanup failed; trying again later');
    }
  };
  return {
    get owner() {
      return worker.owner;
    },
    get stats() {
      return worker.stats;
    },
    start() {
      worker.start();
      if (timer) return;
      void run();
      timer = setInterval(() => void run(), everyMs);
      timer.unref();
    },
    wake: () => worker.wake(),
    async stop() {
      clearInterval(timer);
      await worker.stop();
    },
  };
}
