import type { Outbox } from '../webhooks/outbox';
import type { InboxStore } from './store';

/**
 * The outbox with the inbox's feed beside it: every public event (a new conversation, a message, a
 * close) is also a row of its site's inbox feed, written in the same transaction, so the inbox's
 * live streams see the same changes in one ordered, resumable sequence with its private ones.
 */
export function withInboxActivity(outbox: Outbox, store: InboxStore): Outbox {
  return {
    async emit(trx, input, now) {
      const event = await outbox.emit(trx, input, now);
      await store.append(trx, {
        site_id: input.siteId,
        kind: input.name,
        conversation_id: input.conversation.id,
        event_id: event.id,
        account_id: null,
        body: null,
        created_at: now,
      });
      return event;
    },
  };
}
