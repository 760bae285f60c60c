import type { Knex } from 'knex';
import { afterCommit } from '../db/transaction';
import { ulidBody } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import type { components } from '../../sdk/src/generated/api';
import { findEndpointOfSite, insertEvent, insertPendingDelivery, subscribedEvents, type EventAddress } from './store';
import type { CommittedEvent, EventChannel } from '../delivery/channel';
import type { ReplyEmailSubscriber } from '../visitors/reply-email-rules';

import type { EventName } from './event-names';
export { EVENT_NAMES, type EventName } from './event-names';

type Conversation = components['schemas']['Conversation'];
type Message = components['schemas']['Message'];

export interface EmitInput {
  siteId: string;
  name: EventName;
  conversation: Conversation;
  message: Message | null;
  /**
   * The site's event address when the caller read it in this transaction already (null: the site
   * has none); absent, it is read here.
   */
  eventAddress?: EventAddress | null;
  /**
   * The conversation's visitor's reply-email subscription when the caller read it in this
   * transaction already (withReplyNotices); absent, it is read where it is needed.
   */
  visitor?: ReplyEmailSubscriber;
}

/**
 * Writes an event to the outbox inside the caller's transaction, so the event exists if and only
 * if the change it describes was committed. When the site's address subscribes to it, a pending
 * delivery row is written too; the worker picks it up. The body is serialised once here and its
 * bytes never change afterwards, on any attempt or redelivery.
 */
async function writeEvent(trx: Knex.Transaction, input: EmitInput, now: number): Promise<CommittedEvent> {
  const id = `${input.name}:${ulidBody(now)}`;
  const body = JSON.stringify({
    id,
    event: input.name,
    createdAt: toIsoRequired(now),
    workspaceKey: input.siteId,
    data: { conversation: input.conversation, message: input.message },
  });
  await insertEvent(trx, {
    id,
    site_id: input.siteId,
    name: input.name,
    body,
    created_at: now,
    conversation_id: input.conversation.id,
    message_id: input.message?.id ?? null,
  });
  const endpoint = input.eventAddress !== undefined ? input.eventAddress : await findEndpointOfSite(trx, input.siteId);
  if (endpoint && subscribedEvents(endpoint).includes(input.name)) {
    await insertPendingDelivery(trx, { event_id: id, site_id: input.siteId, endpoint_id: endpoint.id }, now);
  }
  return { kind: 'event', id, siteId: input.siteId, visitorId: input.conversation.visitorId, createdAt: now };
}

/**
 * The one way a change records an event: `emit` inside the change's transaction (opened by
 * runInTransaction), and once that transaction commits the channel tells delivery workers and
 * live streams, in this process and the others, of every event it wrote, in one notice. A
 * transaction that rolls back, or is retried after losing to another writer, tells nobody anything.
 */
export function createOutbox(channel: Pick<EventChannel, 'publish'>) {
  /** The events each open transaction wrote, told together after its commit. */
  const written = new WeakMap<Knex.Transaction, CommittedEvent[]>();
  return {
    async emit(trx: Knex.Transaction, input: EmitInput, now: number): Promise<CommittedEvent> {
      let events = written.get(trx);
      if (!events) {
        const mine: CommittedEvent[] = (events = []);
        afterCommit(trx, () => channel.publish(mine));
        written.set(trx, mine);
      }
      const event = await writeEvent(trx, input, now);
      events.push(event);
      return event;
    },
  };
}

export type Outbox = ReturnType<typeof createOutbox>;
