/**
 * Internal notes in the inbox, without the page (server/notes on the server): the history of a
 * conversation as messages and notes in one list by time, what a live note event does to the notes
 * held, who may still edit a note, and the `@` mention being typed. Pure functions, checked by the
 * unit tier (test/dashboard/inbox-notes.unit.test.ts).
 */
import type { Schemas } from '../api';
import type { InboxLiveEvent } from '../live/inbox-stream';
import type { Member, Message } from './model';

export type Note = Schemas['Note'];

/** One row of a conversation's history. */
export type HistoryItem = { kind: 'message'; id: string; at: string; message: Message } | { kind: 'note'; id: string; at: string; note: Note };

/** The server's edit window (server/notes/service.ts, NOTE_EDIT_WINDOW_MS): its author edits a note for a day. */
export const NOTE_EDIT_WINDOW_MS = 24 * 3600_000;

const byTime = (x: { at: string; id: string }, y: { at: string; id: string }) => (x.at === y.at ? (x.id < y.id ? -1 : 1) : x.at < y.at ? -1 : 1);

/**
 * Messages and notes in one list, oldest first (a note and a message of the same millisecond: by
 * id). `from`: the oldest message loaded while older ones remain to load; notes before it wait for
 * those messages, so a note never shows above messages that belong before it.
 */
export function historyItems(messages: Message[], notes: Note[], from: string | null): HistoryItem[] {
  const items: HistoryItem[] = messages.map((m) => ({ kind: 'message', id: m.id, at: m.createdAt, message: m }));
  for (const n of notes) if (from === null || n.createdAt >= from) items.push({ kind: 'note', id: n.id, at: n.createdAt, note: n });
  return items.sort(byTime);
}

/** Notes merged by id (the later copy wins: an edit), oldest first. */
export function mergeNotes(a: Note[], b: Note[]): Note[] {
  const byId = new Map<string, Note>();
  for (const n of [...a, ...b]) byId.set(n.id, n);
  return [...byId.values()].sort((x, y) => byTime({ at: x.createdAt, id: x.id }, { at: y.createdAt, id: y.id }));
}

const isNote = (v: unknown): v is Note =>
  typeof v === 'object' && v !== null && typeof (v as Note).id === 'string' && typeof (v as Note).conversationId === 'string';

/** The notes of `conversationId` after a live event (the same array when it is not about them). */
export function applyNoteEvent(notes: Note[], e: InboxLiveEvent, conversationId: string): Note[] {
  if ((e.name === 'note.created' || e.name === 'note.updated') && isNote(e.data) && e.data.conversationId === conversationId) {
    // An edit only replaces a note already held: one older than the history loaded comes with its page.
    if (e.name === 'note.updated' && !notes.some((n) => n.id === (e.data as Note).id)) return notes;
    return mergeNotes(notes, [e.data]);
  }
  if (e.name === 'note.deleted') {
    const d = e.data as { id?: unknown; conversationId?: unknown };
    if (d?.conversationId === conversationId && notes.some((n) => n.id === d.id)) return notes.filter((n) => n.id !== d.id);
  }
  return notes;
}

/** Whether `me` may still edit the note (its author, within the day); deleting is the author's or an owner's. */
export const canEdit = (n: Note, me: string, now = Date.now()) => n.authorId === me && now - Date.parse(n.createdAt) < NOTE_EDIT_WINDOW_MS;

/** The `@…` being typed at the caret: where it starts and what follows the `@` (null when the caret is in no mention). */
export function mentionAt(text: string, caret: number): { start: number; query: string } | null {
  const m = /(^|[\s([{,;])@([^\s@]*)$/.exec(text.slice(0, caret));
  return m ? { start: caret - m[2].length - 1, query: m[2].toLowerCase() } : null;
}

/** Members whose email starts with the query, or has it after a dot, dash or underscore; at most 6. */
export function mentionCandidates(members: Member[], query: string, me: string): Member[] {
  return members
    .filter(
      (m) =>
        m.accountId !== me &&
        (m.email.startsWith(query) ||
          m.email
            .split('@')[0]
            .split(/[._-]/)
            .some((w) => w.startsWith(query))),
    )
    .slice(0, 6);
}
