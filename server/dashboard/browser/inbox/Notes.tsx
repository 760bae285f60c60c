/**
 * Internal notes in the open conversation (issue 25, item 5): the notes held and kept live, the
 * Reply / Note switch, the note composer with `@` completion of members, and a note as the history
 * shows it (yellow, "Internal note", its author; edit and delete where allowed). The rules are the
 * server's (server/notes/service.ts); note-model.ts holds the pure parts.
 */
import type { RefObject } from 'preact';
import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { call, callPage, client } from '../api';
import { Button } from '../components/Button';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorBanner } from '../components/ErrorBanner';
import { RelativeTime } from '../components/RelativeTime';
import { subscribeInbox } from '../live/inbox-stream';
import { clearSent, getDraft, markAttempted, updateDraft } from './drafts';
import { Markdown } from './Markdown';
import type { Member } from './model';
import { applyNoteEvent, canEdit, mentionAt, mentionCandidates, mergeNotes, type Note } from './note-model';

/** Notes per page read: the newest first, older ones as the history reaches back to them. */
const NOTES_PAGE = 50;
const MAX_CHARACTERS = 10_000;
/** A note's draft is kept beside the reply's (drafts.ts), under its own key. */
const draftKey = (conversationId: string) => `${conversationId}#note`;

/**
 * The conversation's notes: the newest page at once (again after a resync), older pages while the
 * history loaded reaches further back (`reach`), and every change live from the inbox stream.
 */
export function useNotes(siteId: string, conversationId: string, resyncTick: number) {
  const [notes, setNotes] = useState<Note[]>([]);
  const [error, setError] = useState<unknown>(null);
  // undefined: the first page is not read yet; null: every note is held.
  const cursor = useRef<string | null | undefined>(undefined);
  const oldest = useRef<string | null>(null);
  // How far back notes are wanted (null: all); only ever further back. "\uffff": the newest page.
  const want = useRef<string | null>('\uffff');
  const reading = useRef<Promise<void> | null>(null);
  const path = { siteId, conversationId };

  const page = async (from?: string) => {
    const p = await callPage(() =>
      client.GET('/sites/{siteId}/inbox/conversations/{conversationId}/notes', {
        params: { path, query: { order: 'desc', limit: NOTES_PAGE, ...(from ? { cursor: from } : {}) } },
      }),
    );
    cursor.current = p.nextCursor;
    if (p.items.length) oldest.current = p.items[p.items.length - 1].createdAt;
    setNotes((before) => mergeNotes(before, p.items));
  };

  /** Reads older pages until every note from `from` on is held (`from` null: all of them); one reader at a time. */
  const reach = (from: string | null): Promise<void> => {
    if (from === null || (want.current !== null && from < want.current)) want.current = from;
    return (reading.current ??= (async () => {
      try {
        if (cursor.current === undefined) await page();
        while (cursor.current && (want.current === null || (oldest.current ?? '') >= want.current)) await page(cursor.current);
        setError(null);
      } catch (err) {
        setError(err);
      } finally {
        reading.current = null;
      }
    })());
  };

  // The newest page (again after a resync, merged with what is held).
  useEffect(() => {
    cursor.current = undefined;
    void reach('\uffff');
  }, [conversationId, resyncTick]);

  useEffect(() => subscribeInbox(siteId, (e) => setNotes((n) => applyNoteEvent(n, e, conversationId))), [siteId, conversationId]);

  return {
    notes,
    error,
    reach,
    /** A note written or changed here (its live event comes too, and meets it once). */
    put: (n: Note) => setNotes((before) => mergeNotes(before, [n])),
    drop: (id: string) => setNotes((before) => before.filter((n) => n.id !== id)),
  };
}

/** Reply or Note: two radio buttons (arrow keys move between them), the note one yellow like notes. */
export function ComposeSwitch({ mode, onMode }: { mode: 'reply' | 'note'; onMode: (m: 'reply' | 'note') => void }) {
  const name = useId();
  return (
    <fieldset class="compose-switch">
      <legend class="sr-only">Write</legend>
      {(['reply', 'note'] as const).map((m) => (
        <label key={m} class={`compose-${m}${mode === m ? ' compose-on' : ''}`}>
          <input type="radio" name={name} value={m} checked={mode === m} onChange={() => onMode(m)} class="sr-only" />
          {m === 'reply' ? 'Reply' : 'Note'}
        </label>
      ))}
    </fieldset>
  );
}

export interface NoteComposerProps {
  siteId: string;
  conversationId: string;
  me: string;
  members: Member[];
  field: RefObject<HTMLTextAreaElement>;
  onSent: (n: Note) => void;
}

/**
 * An internal note: markdown, `@` lists the site's members (arrows, Enter or Tab to insert their
 * address, Esc to close), Ctrl/Cmd+Enter sends. Its draft and Idempotency-Key live in drafts.ts
 * like the reply's, so a retry after a lost answer writes the note once.
 */
export function NoteComposer({ siteId, conversationId, me, members, field, onSent }: NoteComposerProps) {
  const id = useId();
  const key = draftKey(conversationId);
  const [text, setText] = useState(() => getDraft(siteId, key).text);
  const [caret, setCaret] = useState(0);
  const [choice, setChoice] = useState(0);
  const [closed, setClosed] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const at = closed ? null : mentionAt(text, caret);
  const matches = at ? mentionCandidates(members, at.query, me) : [];
  const listOpen = matches.length > 0;
  const active = Math.min(choice, matches.length - 1);
  const over = [...text].length - MAX_CHARACTERS;

  /** Where the caret goes once the text just set is on the page. */
  const placeCaret = useRef<number | null>(null);
  const change = (t: string, c: number) => {
    setText(t);
    setCaret(c);
    updateDraft(siteId, key, { text: t });
  };
  const insert = (m: Member | undefined) => {
    if (!m || !at) return;
    const before = `${text.slice(0, at.start)}@${m.email} `;
    change(before + text.slice(caret), before.length);
    setChoice(0);
    placeCaret.current = before.length;
  };
  // The caret goes after the inserted address in the render that shows it, before the next key
  // press: a frame later, it would move back over what a fast typist had typed meanwhile.
  useLayoutEffect(() => {
    const at = placeCaret.current;
    placeCaret.current = null;
    if (at !== null) field.current?.setSelectionRange(at, at);
  });

  const send = async () => {
    const d = getDraft(siteId, key);
    if (busy || !d.text.trim() || [...d.text].length > MAX_CHARACTERS) return;
    setBusy(true);
    setError(null);
    markAttempted(siteId, key);
    try {
      const note = await call(() =>
        client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/notes', {
          params: { path: { siteId, conversationId }, header: { 'Idempotency-Key': d.key } },
          body: { content: d.text, format: 'markdown' },
        }),
      );
      setText(clearSent(siteId, key, d.key).text);
      onSent(note);
    } catch (err) {
      setError(err); // the draft and its key stay: sending again is the same note
    } finally {
      setBusy(false);
    }
  };

  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      return void send();
    }
    if (!listOpen) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      setChoice((active + (e.key === 'ArrowDown' ? 1 : matches.length - 1)) % matches.length);
    } else if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      insert(matches[active]);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      setClosed(true);
    }
  };

  return (
    <form
      class="composer composer-note"
      aria-label="Internal note"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <ErrorBanner error={error} />
      <label for={`${id}-text`} class="sr-only">
        Internal note (markdown)
      </label>
      <div class="composer-field">
        <textarea
          id={`${id}-text`}
          ref={field}
          rows={3}
          value={text}
          placeholder="Write an internal note… only your team sees it. @ mentions a member, Ctrl+Enter adds it."
          aria-describedby={`${id}-hint`}
          aria-controls={listOpen ? `${id}-members` : undefined}
          aria-activedescendant={listOpen ? `${id}-member-${active}` : undefined}
          onInput={(e) => {
            setClosed(false);
            setChoice(0);
            change(e.currentTarget.value, e.currentTarget.selectionStart ?? e.currentTarget.value.length);
          }}
          onKeyUp={(e) => setCaret(e.currentTarget.selectionStart ?? 0)}
          onClick={(e) => setCaret(e.currentTarget.selectionStart ?? 0)}
          onKeyDown={onKeyDown}
        />
        {listOpen && (
          <ul class="canned" id={`${id}-members`} role="listbox" aria-label="Members to mention">
            {matches.map((m, i) => (
              <li
                key={m.accountId}
                id={`${id}-member-${i}`}
                role="option"
                aria-selected={i === active}
                class={i === active ? 'canned-active' : undefined}
                onMouseDown={(e) => {
                  e.preventDefault(); // keeps the focus in the field
                  insert(m);
                }}
              >
                {m.email}
              </li>
            ))}
          </ul>
        )}
      </div>
      <p id={`${id}-hint`} class="hint" role="status">
        {listOpen
          ? `${matches.length} ${matches.length === 1 ? 'member' : 'members'}: arrows to choose, Enter to mention, Esc to close.`
          : 'Not sent to the visitor. A member you @mention is notified.'}
      </p>
      {over > 0 && (
        <p class="field-error" role="alert">
          The note is {over} {over === 1 ? 'character' : 'characters'} over the limit of {MAX_CHARACTERS.toLocaleString('en')}.
        </p>
      )}
      <div class="composer-actions">
        <Button variant="primary" submit busy={busy} disabled={!text.trim() || over > 0}>
          Add note
        </Button>
      </div>
    </form>
  );
}

export interface NoteItemProps {
  siteId: string;
  note: Note;
  me: string;
  owner: boolean;
  onChanged: (n: Note) => void;
  onDeleted: (id: string) => void;
}

/** A note in the history: yellow, "Internal note" and its author; its author edits it for a day, they or an owner delete it. */
export function NoteItem({ siteId, note, me, owner, onChanged, onDeleted }: NoteItemProps) {
  const [editing, setEditing] = useState<string | null>(null);
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const path = { params: { path: { siteId, conversationId: note.conversationId, noteId: note.id } } };
  const mine = note.authorId === me;
  const mentionsMe = note.mentions.some((m) => m.accountId === me);

  const save = async () => {
    if (editing === null || !editing.trim()) return;
    setBusy(true);
    setError(null);
    try {
      onChanged(await call(() => client.PATCH('/sites/{siteId}/inbox/conversations/{conversationId}/notes/{noteId}', { ...path, body: { content: editing } })));
      setEditing(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <li class={`msg msg-note${mentionsMe ? ' note-mentions-me' : ''}`} data-note={note.id}>
      <p class="msg-meta">
        <span class="note-tag">Internal note</span> · <span class="msg-author">{mine ? 'You' : note.authorName}</span> <RelativeTime at={note.createdAt} />
        {note.editedAt && <span title={new Date(note.editedAt).toLocaleString()}> · edited</span>}
      </p>
      {editing === null ? (
        <Markdown content={note.content} format={note.format} class="msg-body" />
      ) : (
        <form
          class="note-edit"
          onSubmit={(e) => {
            e.preventDefault();
            void save();
          }}
        >
          <label class="sr-only" for={`edit-${note.id}`}>
            Edit the note
          </label>
          <textarea
            id={`edit-${note.id}`}
            rows={3}
            value={editing}
            onInput={(e) => setEditing(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                e.preventDefault();
                void save();
              } else if (e.key === 'Escape') {
                e.stopPropagation();
                setEditing(null);
              }
            }}
          />
          <div class="composer-actions">
            <Button variant="link" onClick={() => setEditing(null)}>
              Cancel
            </Button>
            <Button variant="primary" submit busy={busy} disabled={!editing.trim()}>
              Save
            </Button>
          </div>
        </form>
      )}
      {note.mentions.length > 0 && <p class="note-mentions">Mentions: {note.mentions.map((m) => (m.accountId === me ? 'you' : m.name)).join(', ')}</p>}
      <ErrorBanner error={error} />
      {editing === null && (canEdit(note, me) || mine || owner) && (
        <p class="note-actions">
          {canEdit(note, me) && (
            <Button variant="link" onClick={() => setEditing(note.content)} aria-label="Edit this note">
              Edit
            </Button>
          )}
          {(mine || owner) && (
            <Button variant="link" onClick={() => setAsking(true)} aria-label="Delete this note">
              Delete
            </Button>
          )}
        </p>
      )}
      {asking && (
        <ConfirmDialog
          title="Delete this note?"
          confirm="Delete note"
          danger
          onCancel={() => setAsking(false)}
          onConfirm={async () => {
            await call(() => client.DELETE('/sites/{siteId}/inbox/conversations/{conversationId}/notes/{noteId}', path));
            setAsking(false);
            onDeleted(note.id);
          }}
        >
          <p>Your team will no longer see it. The audit log keeps that it was deleted, and by whom.</p>
        </ConfirmDialog>
      )}
    </li>
  );
}
