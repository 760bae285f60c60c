import type { Services } from '../../server/services';
import type { EventStore } from '../../server/webhooks/store';
import type { WorkerOptions } from '../../server/webhooks/worker';

/** A pause a delivery worker decided after an attempt, as it handed the result to the store. */
export interface DecidedPause {
  eventId: string;
  attempt: number;
  status: string;
  /** From the attempt's end to the next attempt's due time: exact, however busy the machine. */
  pauseMs: number;
}

/**
 * Worker options under which a due retry can come only from the worker's own retry timer: its poll
 * runs once an hour (and a channel that says it is live keeps the adaptive poll from looking every
 * 50 ms while busy), while wake-ups for new events are still heard. A retry that waited for anything
 * but that timer would not come within any test's liveness bound. `decided` lists the pauses.
 */
export function retriesByTimerOnly(services: Services): { options: Partial<WorkerOptions>; decided: DecidedPause[] } {
  const events = services.stores.events;
  const decided: DecidedPause[] = [];
  const store: EventStore = {
    ...events,
    finishAttempts: async (...args: Parameters<EventStore['finishAttempts']>) => {
      for (const r of args[1]) decided.push({ eventId: r.eventId, attempt: r.attempt, status: r.next.status, pauseMs: r.next.nextAttemptAt - r.next.now });
      return events.finishAttempts(...args);
    },
  };
  const channel = { subscribe: services.channel.subscribe, live: () => true };
  return { options: { store, pollMs: 3_600_000, channel }, decided };
}
