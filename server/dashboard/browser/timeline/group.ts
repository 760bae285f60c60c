/**
 * A timeline page's flat list (messages, events, attempts by time) as a tree to show: each message
 * with the events it emitted, each event with its attempts. Kinds this page does not know (a later
 * version of the API may add some) stay in the list where they came, shown generically.
 */
import type { Schemas } from '../api';

export type Entry = Schemas['TimelineEntry'];
export type MessageEntry = Extract<Entry, { type: 'message' }>;
export type EventEntry = Extract<Entry, { type: 'event' }>;
export type AttemptEntry = Extract<Entry, { type: 'attempt' }>;
export type ReplayEntry = Extract<Entry, { type: 'replayed' }>;
export type NoteEntry = Extract<Entry, { type: 'note' }>;
/** Any entry, including kinds unknown to this page. */
export type AnyEntry = { type: string; at?: string } & Record<string, unknown>;

export interface EventNode {
  event: EventEntry;
  attempts: AttemptEntry[];
}
export type Node =
  | { kind: 'message'; message: MessageEntry; events: EventNode[] }
  | { kind: 'event'; node: EventNode }
  | { kind: 'replay'; entry: ReplayEntry }
  | { kind: 'note'; entry: NoteEntry }
  | { kind: 'other'; entry: AnyEntry };

export function groupTimeline(entries: AnyEntry[]): Node[] {
  const out: Node[] = [];
  const messages = new Map<string, Extract<Node, { kind: 'message' }>>();
  const events = new Map<string, EventNode>();
  for (const raw of entries) {
    const entry = raw as Entry;
    if (entry.type === 'message' && typeof entry.messageId === 'string') {
      const node = { kind: 'message' as const, message: entry, events: [] };
      messages.set(entry.messageId, node);
      out.push(node);
    } else if (entry.type === 'event' && typeof entry.eventId === 'string') {
      const node: EventNode = { event: entry, attempts: [] };
      events.set(entry.eventId, node);
      const parent = entry.messageId ? messages.get(entry.messageId) : undefined;
      if (parent) parent.events.push(node);
      else out.push({ kind: 'event', node });
    } else if (entry.type === 'attempt' && events.has(entry.eventId)) events.get(entry.eventId)!.attempts.push(entry);
    else if (entry.type === 'replayed') out.push({ kind: 'replay', entry });
    else if (entry.type === 'note' && typeof entry.noteId === 'string') out.push({ kind: 'note', entry });
    else out.push({ kind: 'other', entry: raw });
  }
  return out;
}
