import type { Logger } from '../platform/logger';
import { shouldAutoDisable, streakAfter } from './address-rules';
import type { Knex } from 'knex';
import type { EndpointRow, EventStore } from './store';

/** What runs in the transaction that disables an address after persistent failure (its audit entry). */
export type AutoDisabledHook = (siteId: string, endpointId: string, trx: Knex.Transaction) => Promise<unknown> | void;

/** A delivery that ended with an attempt (delivered, or failed for good), with the address as its claim read it. */
export interface EndedDelivery {
  endpoint: EndpointRow;
  status: 'delivered' | 'failed';
}

/**
 * The failure streak and automatic disabling, run by the worker after each group of results is
 * committed. It costs nothing while deliveries succeed: the claim already read the address's
 * streak, so a success writes only when that snapshot saw one. A delivery that failed for good
 * (rare: the end of hours of retries, or a receiver's 4xx) adds to the streak, and the rule
 * (address-rules.ts) is evaluated on the snapshot plus the failures just counted; only a
 * disabling writes again.
 */
export function createStreakKeeper(opts: {
  store: Pick<EventStore, 'noteEndedDeliveries' | 'disableEndpointWith'>;
  logger: Pick<Logger, 'warn' | 'error'>;
  /** Run once per address the rule disabled, in the transaction that disables it (services.ts writes the audit entry). */
  onAutoDisabled?: AutoDisabledHook;
  now?: () => number;
}) {
  const now = opts.now ?? Date.now;
  return async function afterResults(ended: EndedDelivery[]): Promise<void> {
    const per = new Map<string, { endpoint: EndpointRow; delivered: number; failed: number }>();
    for (const e of ended) {
      const p = per.get(e.endpoint.id) ?? { endpoint: e.endpoint, delivered: 0, failed: 0 };
      p[e.status]++;
      per.set(e.endpoint.id, p);
    }
    const at = now();
    for (const { endpoint, delivered, failed } of per.values()) {
      try {
        if (delivered > 0) {
          if (endpoint.failure_streak > 0) await opts.store.noteEndedDeliveries(endpoint.id, { delivered, failed }, at);
          continue;
        }
        await opts.store.noteEndedDeliveries(endpoint.id, { delivered, failed }, at);
        const streak = streakAfter({ failingSince: endpoint.failing_since, failedDeliveries: endpoint.failure_streak }, { delivered, failed }, at);
        if (
          endpoint.disabled_at === null &&
          shouldAutoDisable(streak, at) &&
          (await opts.store.disableEndpointWith(endpoint.id, 'failing', at, (trx) => opts.onAutoDisabled?.(endpoint.site_id, endpoint.id, trx)))
        ) {
          opts.logger.warn({ endpointId: endpoint.id, siteId: endpoint.site_id, streak }, 'event delivery: address disabled after persistent failure');
        }
      } catch (err) {
        // The streak is advisory: a lost update delays a disabling, it never loses a delivery.
        opts.logger.error({ endpointId: endpoint.id, err: { message: (err as Error).message } }, 'event delivery: the failure streak could not be written');
      }
    }
  };
}
