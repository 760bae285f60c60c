import type { Knex } from 'knex';
import { afterCommit, lastInTransaction } from '../db/transaction';
import type { EventChannel } from '../delivery/channel';
import type { Outbox } from '../webhooks/outbox';
import type { InboxStore } from './store';

/**
 * The outbox with the inbox's feed beside it: every public event (a new conversation, a message, a
 * close) is also a row of its site's inbox feed, written in the same transaction, so the inbox's
 * live streams see the same changes in one ordered, resumable sequence with its private ones. The
 * row is the transaction's last write (lastInTransaction): its position takes the site's feed
 * counter lock (store.ts), held from there to the commit, so the site's other writers wait for
 * that short end and not for the rest of this transaction's work.
 */
export function withInboxActivity(outbox: Outbox, store: Pick<InboxStore, 'append'>): Outbox {
  return {
    async emit(trx, input, now) {
      const event = await outbox.emit(trx, input, now);
      const row = {
        site_id: input.siteId,
        kind: input.name,
        conversation_id: input.conversation.id,
        event_id: event.id,
        account_id: null,
        body: null,
        created_at: now,
      };
      lastInTransaction(trx, async () => void (await store.append(trx, row)));
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
export type InboxChange = {
  siteId: string;
  kind: string;
  /** Who made it, or, for a kind of PRIVATE_TO_ACCOUNT, the one member it is shown to. */
  accountId: string | null;
  /** The event's `data` on the members' streams. */
  body: object;
} & (
  | {
      conversationId: string;
      /** The conversation's visitor (the channel's inbox notices name one). */
      visitorId: string;
    }
  /** A change of the whole site (a tag renamed or deleted): no conversation, no visitor. */
  | { conversationId: null; visitorId: null }
);

/**
 * Writes private changes to the site's feed in the change's transaction, and tells the streams of
 * every instance once it commits (the channel; the hub's poll covers a lost notice). For features
 * beside the inbox service (notes, tags) that show their changes live on the inbox stream. Like a
 * public event's row, the row is written last in the transaction (in the order the changes were
 * recorded), so the site's feed counter is held for the commit only.
 */
export function createInboxRecorder(deps: { store: Pick<InboxStore, 'append'>; channel: Pick<EventChannel, 'publish'>; now: () => number }) {
  return async function recordInboxChange(trx: Knex.Transaction, change: InboxChange): Promise<void> {
    const at = deps.now();
    const row = {
      site_id: change.siteId,
      kind: change.kind,
      conversation_id: change.conversationId,
      event_id: null,
      account_id: change.accountId,
      body: JSON.stringify(change.body),
      created_at: at,
    };
    // A site-level notice names no visitor (the inbox's listeners go by site; the window's ignore inbox notices).
    const visitorId = change.visitorId ?? '';
    lastInTransaction(trx, async () => {
      const position = await deps.store.append(trx, row);
      afterCommit(trx, () => deps.channel.publish([{ kind: 'inbox', siteId: change.siteId, visitorId, position, createdAt: at }]));
    });
  };
}

export type InboxRecorder = ReturnType<typeof createInboxRecorder>;
