import type { RefObject } from 'preact';
import { useId, useRef, useState } from 'preact/hooks';
import { call, client } from '../api';
import { Button } from '../components/Button';
import { ErrorBanner } from '../components/ErrorBanner';
import { filterReplies } from './canned';
import { useFilledReplies } from './SharedReplies';
import { clearSent, getDraft, markAttempted, updateDraft, type Draft } from './drafts';
import { Markdown } from './Markdown';
import { formatSize, type Message } from './model';
import { useTypingReport } from '../live/typing';

/** What the hint says while `/` finds nothing: still loading, failed, none on the site, or none matching. */
function slashHint(canned: { replies: unknown[] | null; error: unknown }): string {
  if (canned.error) return 'The shared replies could not be loaded.';
  if (!canned.replies) return 'Loading shared replies…';
  return canned.replies.length ? 'No shared reply matches.' : 'This site has no shared replies yet: owners add them under Shared replies.';
}

/** The API's limits of one reply (openapi/manage.yaml, InboxReplyMultipartRequest). */
const MAX_FILES = 10;
const MAX_CHARACTERS = 10_000;

export interface ComposerProps {
  siteId: string;
  conversationId: string;
  accountId: string;
  onSent: (m: Message) => void;
  /** The reply field, for the `r` shortcut. */
  field: RefObject<HTMLTextAreaElement>;
  /** Opens the shared replies' dialog. */
  onManageCanned: () => void;
  /** Changes when the shared replies were edited (read again from the server). */
  cannedVersion: number;
}

/**
 * The reply: markdown with a preview, files by the picker or dropped on it, Ctrl/Cmd+Enter sends,
 * `/` at the start lists the site's shared replies, filled in for this conversation. The text, files and Idempotency-Key live in the
 * conversation's draft (drafts.ts), so a sign-in dialog, a switch of conversation or a failed send
 * loses nothing, and a retry of the same message is recognised by the server as the same.
 */
export function Composer({ siteId, conversationId, onSent, field, onManageCanned, cannedVersion }: ComposerProps) {
  const id = useId();
  const [draft, setDraft] = useState<Draft>(() => getDraft(siteId, conversationId));
  const [preview, setPreview] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [fileError, setFileError] = useState('');
  const [dragging, setDragging] = useState(false);
  const [choice, setChoice] = useState(0);
  const [dismissed, setDismissed] = useState(false);

  const change = (c: Partial<Pick<Draft, 'text' | 'files'>>) => setDraft(updateDraft(siteId, conversationId, c));
  // Only whether the member types reaches the visitor and colleagues, never the text.
  const typing = useTypingReport(siteId, conversationId);

  // `/` at the very start of the reply, on one line: the shared replies matching what follows it,
  // read from the server the first time it is typed here.
  const slash = !dismissed && draft.text.startsWith('/') && !draft.text.includes('\n');
  const wanted = useRef(false);
  wanted.current ||= slash;
  const canned = useFilledReplies(siteId, conversationId, cannedVersion, wanted.current);
  const matches = slash ? filterReplies(canned.replies ?? [], draft.text.slice(1)) : [];
  const listOpen = slash && matches.length > 0;
  const active = Math.min(choice, matches.length - 1);

  const insert = (i: number) => {
    const r = matches[i];
    if (!r) return;
    change({ text: r.text });
    setChoice(0);
    field.current?.focus();
  };

  const addFiles = (list: FileList | File[] | null) => {
    if (!list) return;
    const all = [...draft.files, ...Array.from(list)];
    setFileError(all.length > MAX_FILES ? `A reply carries at most ${MAX_FILES} files: the first ${MAX_FILES} are kept.` : '');
    change({ files: all.slice(0, MAX_FILES) });
  };

  // The API counts code points, as the spread does (an emoji is one, not two UTF-16 units).
  const over = [...draft.text].length - MAX_CHARACTERS;
  const empty = !draft.text.trim() && !draft.files.length;

  const send = async () => {
    const d = getDraft(siteId, conversationId);
    if (busy || (!d.text.trim() && !d.files.length) || [...d.text].length > MAX_CHARACTERS) return;
    setBusy(true);
    setError(null);
    typing.stop();
    markAttempted(siteId, conversationId);
    const path = { params: { path: { siteId, conversationId }, header: { 'Idempotency-Key': d.key } } };
    try {
      const sent = d.files.length
        ? await call(() => {
            // Built again for each try (a retry after sign-in sends the same parts).
            const form = new FormData();
            form.append('content', d.text);
            form.append('format', 'markdown');
            for (const f of d.files) form.append('file', f, f.name);
            return client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/messages', { ...path, body: form as never });
          })
        : await call(() =>
            client.POST('/sites/{siteId}/inbox/conversations/{conversationId}/messages', { ...path, body: { content: d.text, format: 'markdown' } }),
          );
      // Typed while it was being sent (the live history shows it before this answer comes): kept.
      const typedMeanwhile = getDraft(siteId, conversationId).key !== d.key;
      setDraft(clearSent(siteId, conversationId, d.key));
      if (!typedMeanwhile) {
        setPreview(false);
        setFileError('');
      }
      onSent(sent);
    } catch (err) {
      setError(err); // the draft stays as it was, with its key: sending again is the same message
    } finally {
      setBusy(false);
    }
  };

  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void send();
      return;
    }
    if (!listOpen) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      setChoice((active + (e.key === 'ArrowDown' ? 1 : matches.length - 1)) % matches.length);
    } else if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      insert(active);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      setDismissed(true);
    }
  };

  return (
    <form
      class={`composer${dragging ? ' composer-dragging' : ''}`}
      aria-label="Reply"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => {
        if (!e.dataTransfer?.types.includes('Files')) return;
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        if (!e.dataTransfer?.files.length) return;
        e.preventDefault();
        setDragging(false);
        addFiles(e.dataTransfer.files);
      }}
    >
      <ErrorBanner error={error} />
      <label for={`${id}-text`} class="sr-only">
        Reply (markdown)
      </label>
      <div class="composer-field">
        <textarea
          id={`${id}-text`}
          ref={field}
          rows={3}
          value={draft.text}
          placeholder="Write a reply… Markdown works. / for shared replies, Ctrl+Enter sends."
          aria-describedby={`${id}-hint`}
          aria-controls={listOpen ? `${id}-canned` : undefined}
          aria-activedescendant={listOpen ? `${id}-canned-${active}` : undefined}
          onInput={(e) => {
            const text = e.currentTarget.value;
            if (!text.startsWith('/')) setDismissed(false);
            setChoice(0);
            change({ text });
            if (text.trim()) typing.input();
            else typing.stop();
          }}
          onKeyDown={onKeyDown}
        />
        {listOpen && (
          <ul class="canned" id={`${id}-canned`} role="listbox" aria-label="Shared replies">
            {matches.map((r, i) => (
              <li
                key={`${i}-${r.title}`}
                id={`${id}-canned-${i}`}
                role="option"
                aria-selected={i === active}
                class={i === active ? 'canned-active' : undefined}
                onMouseDown={(e) => {
                  e.preventDefault(); // keeps the focus in the field
                  insert(i);
                }}
              >
                <strong>{r.title}</strong> <span class="muted">{r.text}</span>
              </li>
            ))}
          </ul>
        )}
      </div>
      <p id={`${id}-hint`} class="hint" role="status">
        {listOpen
          ? `${matches.length} shared ${matches.length === 1 ? 'reply' : 'replies'}: arrows to choose, Enter to insert, Esc to close.`
          : slash
            ? slashHint(canned)
            : 'Markdown: **bold**, *italic*, `code`, [link](https://…), lists and > quotes. Drop files here.'}
      </p>
      {preview && (
        <div class="composer-preview" aria-label="Preview" role="region" tabIndex={0}>
          {draft.text.trim() ? <Markdown content={draft.text} format="markdown" /> : <p class="muted">Nothing to preview.</p>}
        </div>
      )}
      {draft.files.length > 0 && (
        <ul class="composer-files" aria-label="Files to send">
          {draft.files.map((f, i) => (
            <li key={`${i}-${f.name}`}>
              <span class="composer-file-name">{f.name}</span> <span class="muted">{formatSize(f.size)}</span>
              <Button variant="link" aria-label={`Remove ${f.name}`} onClick={() => change({ files: draft.files.filter((_, j) => j !== i) })}>
                Remove
              </Button>
            </li>
          ))}
        </ul>
      )}
      {over > 0 && (
        <p class="field-error" role="alert">
          The reply is {over} {over === 1 ? 'character' : 'characters'} over the limit of {MAX_CHARACTERS.toLocaleString('en')}.
        </p>
      )}
      {fileError && (
        <p class="field-error" role="alert">
          {fileError}
        </p>
      )}
      <div class="composer-actions">
        <span class="file-pick">
          <input
            id={`${id}-files`}
            type="file"
            multiple
            class="sr-only"
            onChange={(e) => {
              addFiles(e.currentTarget.files);
              e.currentTarget.value = '';
            }}
          />
          <label for={`${id}-files`} class="btn btn-secondary">
            Attach files
          </label>
        </span>
        <Button aria-pressed={preview ? 'true' : 'false'} onClick={() => setPreview(!preview)}>
          Preview
        </Button>
        <Button variant="link" onClick={onManageCanned}>
          Shared replies
        </Button>
        <Button variant="primary" submit busy={busy} disabled={empty || over > 0}>
          Send
        </Button>
      </div>
    </form>
  );
}
