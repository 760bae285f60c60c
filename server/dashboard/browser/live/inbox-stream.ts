/**
 * The inbox's live events for the dashboard's pages (the interface in _notes/DASHBOARD.md): one
 * stream per site shared by every tab, resumed with Last-Event-ID after sleep, network loss and
 * restarts, each id delivered once and in order. The machinery is in hub.ts.
 */
import { subscribe, subscribeResync } from './hub';
import type { InboxLiveEvent } from './events';

export type { InboxLiveEvent, InboxLiveEventName } from './events';

/** Calls `listener` with each event of the site's inbox; answers the unsubscribe. */
export function subscribeInbox(siteId: string, listener: (event: InboxLiveEvent) => void): () => void {
  return subscribe(siteId, listener);
}

/**
 * Calls `listener` when the stream could not resume exactly (the feed was purged past the last id,
 * or its position went backwards): lists reload from the API.
 */
export function onResync(siteId: string, listener: () => void): () => void {
  return subscribeResync(siteId, listener);
}
