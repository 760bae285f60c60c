import type { Knex } from 'knex';
import { ulidBody } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import type { components } from '../../sdk/src/generated/api';
import { findEndpointOfSite, insertEvent, insertPendingDelivery, subscribedEvents } from './store';

import type { EventName } from './event-names';
export { EVENT_NAMES, type EventName } from './event-names';

type Conversation = components['schemas']['Conversation'];
type Message = components['schemas']['Message'];

/** What a committed event touched: the chat window's live streams are woken by its site and visitor. */
export interface EmittedEvent {
  id: string;
  siteId: string;
  visitorId: string;
  createdAt: number;
}

/** Told after a commit, with the events it wrote. */
export type OnEvents = (events: EmittedEvent[]) => void;

export interface EmitInput {
  siteId: string;
  name: EventName;
  conversation: Conversation;
  message: Message | null;
}

/**
 * Writes an event to the outbox inside the caller's transaction, so the event exists if and only
 * if the change it describes was committed. When the site's address subscribes to it, a pending
 * delivery row is written too; the worker picks it up. The body is serialised once here and its
 * bytes never change afterwards, on any attempt or redelivery.
 */
export async function emitEvent(trx: Knex.Transaction, input: EmitInput, now: number): Promise<EmittedEvent> {
  const id = `${input.name}:${ulidBody(now)}`;
  const body = JSON.stringify({
    id,
    event: input.name,
    createdAt: toIsoRequired(now),
    workspaceKey: input.siteId,
    data: { conversation: input.conversation, message: input.message },
  });
  await insertEvent(trx, { id, site_id: input.siteId, name: input.name, body, created_at: now });
  const endpoint = await findEndpointOfSite(trx, input.siteId);
  if (endpoint && subscribedEvents(endpoint).includes(input.name)) {
    await insertPendingDelivery(trx, { event_id: id, site_id: input.siteId, endpoint_id: endpoint.id }, now);
  }
  return { id, siteId: input.siteId, visitorId: input.conversation.visitorId, createdAt: now };
}
