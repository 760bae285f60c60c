/** The inbox's live events as the dashboard's pages get them (re-exported by inbox-stream.ts, the pages' entry). */
export type InboxLiveEventName =
  | 'conversation.started'
  | 'message.created'
  | 'conversation.closed'
  | 'conversation.assigned'
  | 'conversation.read'
  // Internal notes (server/notes): `note.mentioned` reaches only the member a note mentions.
  | 'note.created'
  | 'note.updated'
  | 'note.deleted'
  | 'note.mentioned'
  /** The visitor of a conversation moved or said more of itself (the side panel reads it again). */
  | 'visitor.context'
  /** A member changed a conversation's tags: `{conversationId, tags, by}` (server/tags). */
  | 'conversation.tagged';

/**
 * `data` is as the stream sends it (operation streamInbox in openapi/manage.yaml); `replayed` is true
 * for the catch-up of a reconnect (events up to the feed's position when it resumed), false for live ones.
 */
export interface InboxLiveEvent {
  id: string;
  name: InboxLiveEventName;
  data: unknown;
  replayed: boolean;
}
