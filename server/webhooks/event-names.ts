import type { components } from '../../sdk/src/generated/api';

/** The events a site can subscribe to: named by the outbox that writes them and the store that filters them. */
export type EventName = components['schemas']['EventName'];
export const EVENT_NAMES: EventName[] = ['conversation.started', 'message.created', 'conversation.closed'];
