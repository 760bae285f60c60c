/**
 * Internal notes in the inbox without a browser (server/dashboard/browser/inbox/note-model.ts): the
 * history of messages and notes by time, what each live note event does, the edit window, and the
 * `@` mention being typed with the members it offers.
 */
import {
  applyNoteEvent,
  canEdit,
  historyItems,
  mentionAt,
  mentionCandidates,
  mergeNotes,
  NOTE_EDIT_WINDOW_MS,
  type Note,
} from '../../server/dashboard/browser/inbox/note-model';
import type { Member, Message } from '../../server/dashboard/browser/inbox/model';
import type { InboxLiveEvent } from '../../server/dashboard/browser/live/inbox-stream';

const CONV = 'conv_01jd8x3r5k0000000000000001';
const ME = 'usr_01jd8x3r5k0000000000000001';
const OTHER = 'usr_01jd8x3r5k0000000000000002';
const at = (minute: number) => `2026-11-26T06:${String(minute).padStart(2, '0')}:00.000Z`;
const msg = (id: string, minute: number): Message => ({
  id,
  conversationId: CONV,
  direction: 'incoming',
  origin: 'widget',
  apiKeyId: null,
  authorId: null,
  content: id,
  format: 'plain',
  attachments: [],
  createdAt: at(minute),
});
const note = (id: string, minute: number, over: Partial<Note> = {}): Note => ({
  id,
  conversationId: CONV,
  authorId: ME,
  authorName: 'me',
  content: id,
  format: 'markdown',
  mentions: [],
  createdAt: at(minute),
  editedAt: null,
  ...over,
});
const event = (name: InboxLiveEvent['name'], data: unknown) => ({ id: '1', name, data, replayed: false }) as InboxLiveEvent;

describe('historyItems', () => {
  test('messages and notes by time; a note of the same millisecond as a message by id', () => {
    const items = historyItems([msg('msg_b', 1), msg('msg_d', 3)], [note('note_c', 2), note('note_a', 1)], null);
    expect(items.map((i) => i.id)).toEqual(['msg_b', 'note_a', 'note_c', 'msg_d']);
    expect(items.map((i) => i.kind)).toEqual(['message', 'note', 'note', 'message']);
  });

  test('while older messages remain to load, notes before the oldest loaded wait for them', () => {
    const notes = [note('note_old', 1), note('note_new', 5)];
    expect(historyItems([msg('msg_x', 4)], notes, at(4)).map((i) => i.id)).toEqual(['msg_x', 'note_new']);
    expect(historyItems([msg('msg_w', 0), msg('msg_x', 4)], notes, null).map((i) => i.id)).toEqual(['msg_w', 'note_old', 'msg_x', 'note_new']);
  });
});

describe('live note events', () => {
  const held = [note('note_a', 1)];
  test('created adds once, in order; an echo of a note already held changes nothing but its copy', () => {
    const added = applyNoteEvent(held, event('note.created', note('note_b', 0)), CONV);
    expect(added.map((n) => n.id)).toEqual(['note_b', 'note_a']);
    expect(applyNoteEvent(added, event('note.created', note('note_b', 0)), CONV)).toHaveLength(2);
  });
  test('updated replaces a note held, and ignores one not held (it comes with its page)', () => {
    const edited = applyNoteEvent(held, event('note.updated', note('note_a', 1, { content: 'new', editedAt: at(2) })), CONV);
    expect(edited).toEqual([note('note_a', 1, { content: 'new', editedAt: at(2) })]);
    expect(applyNoteEvent(held, event('note.updated', note('note_z', 1)), CONV)).toBe(held);
  });
  test('deleted removes it; events of another conversation or kind leave the same array', () => {
    expect(applyNoteEvent(held, event('note.deleted', { id: 'note_a', conversationId: CONV, deletedBy: ME }), CONV)).toEqual([]);
    expect(applyNoteEvent(held, event('note.deleted', { id: 'note_a', conversationId: 'conv_other', deletedBy: ME }), CONV)).toBe(held);
    expect(applyNoteEvent(held, event('note.created', { ...note('note_q', 1), conversationId: 'conv_other' }), CONV)).toBe(held);
    expect(applyNoteEvent(held, event('message.created', { message: msg('msg_a', 1) }), CONV)).toBe(held);
    expect(applyNoteEvent(held, event('note.created', null), CONV)).toBe(held);
  });
  test('mergeNotes keeps the later copy of an id', () => {
    expect(mergeNotes([note('note_a', 1)], [note('note_a', 1, { content: 'later' })])).toEqual([note('note_a', 1, { content: 'later' })]);
  });
});

test('its author edits a note for a day; nobody else ever', () => {
  const n = note('note_a', 0);
  const written = Date.parse(n.createdAt);
  expect(canEdit(n, ME, written + NOTE_EDIT_WINDOW_MS - 1)).toBe(true);
  expect(canEdit(n, ME, written + NOTE_EDIT_WINDOW_MS)).toBe(false);
  expect(canEdit(n, OTHER, written)).toBe(false);
});

describe('typing a mention', () => {
  test('the @ before the caret, at the start or after a space or bracket, and what follows it', () => {
    expect(mentionAt('@an', 3)).toEqual({ start: 0, query: 'an' });
    expect(mentionAt('ask @An', 7)).toEqual({ start: 4, query: 'an' });
    expect(mentionAt('(@', 2)).toEqual({ start: 1, query: '' });
    expect(mentionAt('ask @ana and', 12)).toBeNull(); // the caret left it
    expect(mentionAt('mail@ana', 8)).toBeNull(); // inside an address
    expect(mentionAt('@ana@ex', 7)).toBeNull(); // an address typed out: nothing to offer
  });
  test('members matching the start of their address or of a part of its local part, never oneself, at most 6', () => {
    const member = (accountId: string, email: string): Member => ({
      accountId,
      email,
      name: email.split('@')[0],
      displayName: null,
      role: 'agent',
      joinedAt: at(0),
      emailVerified: true,
    });
    const members = [member(ME, 'me@example.com'), member(OTHER, 'ana.lopez@example.com'), member('usr_3', 'bob@example.com')];
    expect(mentionCandidates(members, 'lo', ME).map((m) => m.email)).toEqual(['ana.lopez@example.com']);
    expect(mentionCandidates(members, '', ME).map((m) => m.email)).toEqual(['ana.lopez@example.com', 'bob@example.com']);
    expect(mentionCandidates(members, 'me', ME)).toEqual([]);
    const many = Array.from({ length: 9 }, (_, i) => member(`usr_${i + 10}`, `agent${i}@example.com`));
    expect(mentionCandidates(many, 'agent', ME)).toHaveLength(6);
  });
});
