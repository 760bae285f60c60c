import type { components, operations } from './generated/api.js';

type Schemas = components['schemas'];

/** A conversation of the key's site. */
export type Conversation = Schemas['Conversation'];
export type ConversationState = Schemas['ConversationState'];
/** A message: from the visitor (`incoming`), or to the visitor (`outgoing`) from an agent or the API. */
export type Message = Schemas['Message'];
export type MessageDirection = Schemas['MessageDirection'];
export type MessageOrigin = Schemas['MessageOrigin'];
export type MessageFormat = Schemas['MessageFormat'];
/** A file attached to a message; `url` opens it without a key for one hour. */
export type Attachment = Schemas['Attachment'];
export type PageInfo = Schemas['PageInfo'];

/** `conversation.started`: a visitor's first message started a conversation (`data.message` is that message). */
export type ConversationStartedEvent = Schemas['ConversationStartedEvent'];
/** `message.created`: a message appeared, in either direction (your own replies included). */
export type MessageCreatedEvent = Schemas['MessageCreatedEvent'];
/** `conversation.closed`: a conversation was closed (`data.message` is null). */
export type ConversationClosedEvent = Schemas['ConversationClosedEvent'];
/** Any event delivered to your address; switch on `event` to narrow it. */
export type WebhookEvent = ConversationStartedEvent | MessageCreatedEvent | ConversationClosedEvent;
export type WebhookEventName = WebhookEvent['event'];
/** The event type for one name: `WebhookEventOf<'message.created'>`. */
export type WebhookEventOf<N extends WebhookEventName> = Extract<WebhookEvent, { event: N }>;

type ListConversationsQuery = NonNullable<operations['listConversations']['parameters']['query']>;
type TimeFilter = 'createdAfter' | 'createdBefore' | 'updatedAfter' | 'updatedBefore';

/** Filters of `conversations.list`; times as ISO 8601 strings or `Date`s (`...After` inclusive, `...Before` exclusive). */
export type ListConversationsParams = Omit<ListConversationsQuery, TimeFilter> & { [K in TimeFilter]?: string | Date };

/** Options of `messages.list`: `order` `asc` (default, oldest first) or `desc`. */
export type ListMessagesParams = NonNullable<operations['listMessages']['parameters']['query']>;
