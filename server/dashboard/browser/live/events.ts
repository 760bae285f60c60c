/**
 * The inbox's live events as the dashboard's pages get them (re-exported by inbox-stream.ts, the
 * pages' entry). Names and `data` are generated from the document (`InboxStreamEvent` in
 * openapi/manage.yaml, operation streamInbox): a name the document adds or drops fails the build here.
 */
import type { components } from '../../../manage/generated/api';

type StreamEvent = components['schemas']['InboxStreamEvent'];

export type InboxLiveEventName = StreamEvent['event'];

/**
 * One event of the stream. `id` is the feed position, `undefined` on an ephemeral event
 * (`conversation.typing`: never stored, never replayed); `replayed` is true for the catch-up of a
 * reconnect (events up to the feed's position when it resumed), false for live ones.
 */
export type InboxLiveEvent = StreamEvent extends infer E
  ? E extends { event: infer N; data: infer D }
    ? { id: E extends { id: string } ? string : undefined; name: N; data: D; replayed: boolean }
    : never
  : never;

/** Every name of the document, for the stream to tell its events from a newer service's (kept exhaustive by the type). */
export const INBOX_LIVE_EVENT_NAMES: ReadonlySet<string> = new Set(
  Object.keys({
    'conversation.started': 1,
    'message.created': 1,
    'conversation.closed': 1,
    'conversation.assigned': 1,
    'conversation.read': 1,
    'note.created': 1,
    'note.updated': 1,
    'note.deleted': 1,
    'note.mentioned': 1,
    'visitor.context': 1,
    'conversation.seen': 1,
    'conversation.typing': 1,
    'conversation.tagged': 1,
    'tag.created': 1,
    'tag.renamed': 1,
    'tag.deleted': 1,
  } satisfies Record<InboxLiveEventName, 1>),
);

/** The ephemeral events: they carry no id, and are shown while fresh rather than kept. */
export const EPHEMERAL_EVENTS: ReadonlySet<string> = new Set<InboxLiveEventName>(['conversation.typing']);
