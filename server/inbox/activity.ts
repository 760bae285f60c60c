import type { Knex } from 'knex';
import { afterCommit } from '../db/transaction';
import type { EventChannel } from '../webhooks/channel';
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

/**
 * Feed rows shown to one member only, `account_id` being that member: their own read marks, and
 * the notice that a note mentioned them (the others see the note, not whom it calls).
 */
export const PRIVATE_TO_ACCOUNT: ReadonlySet<string> = new Set(['conversation.read', 'note.mentioned']);

/** One private change of a site's inbox (no public event behind it): what `recordInboxChange` writes. */
export interface InboxChange {
  siteId: string;
  /** The conversation's visitor (the channel's inbox notices name one). */
  visitorId: string;
  kind: string;
  conversationId: string;
  /** Who made it, or, for a kind of PRIVATE_TO_ACCOUNT, the one member it is shown to. */
  accountId: string | null;
  /** The event's `data` on the members' streams. */
  body: object;
}

/**
 * Writes private changes to the site's feed in the change's transaction, and tells the streams of
 * every instance once it commits (the channel; the hub's poll covers a lost notice). For features
 * beside the inbox service (notes) that show their changes live on the inbox stream.
 */
export function createInboxRecorder(deps: { store: Pick<InboxStore, 'append'>; channel: Pick<EventChannel, 'publish'>; now: () => number }) {
  return async function recordInboxChange(trx: Knex.Transaction, change: InboxChange): Promise<number> {
    const at = deps.now();
    const position = await deps.store.append(trx, {
      site_id: change.siteId,
      kind: change.kind,
      conversation_id: change.conversationId,
      event_id: null,
      account_id: change.accountId,
      body: JSON.stringify(change.body),
      created_at: at,
    });
    afterCommit(trx, () => deps.channel.publish([{ kind: 'inbox', siteId: change.siteId, visitorId: change.visitorId, position, createdAt: at }]));
    return position;
  };
}

export type InboxRecorder = ReturnType<typeof createInboxRecorder>;
