import { toIsoRequired } from '../platform/time';
import type { EventName } from './outbox';

/** The example ids of openapi/openapi.yaml (ConversationIdValue and Message's examples), so a receiver sees recognisable objects. */
const EXAMPLE_CONVERSATION = 'conv_01jd8x3r5k0000000000000000';
const EXAMPLE_MESSAGE = 'msg_01jd8x3r5k0000000000000000';

/**
 * The body of a test delivery: a payload of `name` exactly as a real one is shaped (the event
 * schemas of openapi.yaml), about the document's example conversation, so a receiver's parsing and
 * signature checks run as for real events. `id` is the test delivery's own id.
 */
export function examplePayload(name: EventName, id: string, siteId: string, at: number) {
  const iso = toIsoRequired(at);
  const closed = name === 'conversation.closed';
  const conversation = {
    id: EXAMPLE_CONVERSATION,
    state: closed ? 'closed' : 'open',
    visitorId: 'visitor-example-1',
    createdAt: iso,
    updatedAt: iso,
    lastMessageAt: iso,
    closedAt: closed ? iso : null,
  };
  const message = {
    id: EXAMPLE_MESSAGE,
    conversationId: EXAMPLE_CONVERSATION,
    direction: 'incoming',
    origin: 'widget',
    apiKeyId: null,
    content: 'Hello! This is a test delivery from the dashboard.',
    format: 'plain',
    attachments: [],
    createdAt: iso,
  };
  return { id, event: name, createdAt: iso, workspaceKey: siteId, data: { conversation, message: closed ? null : message } };
}
