import type { SearchIndex } from '../search/service';
import type { Knex } from 'knex';
import { ApiError, notFound } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIso, toIsoRequired } from '../platform/time';
import { toPage, type CursorCodec } from '../platform/cursor';
import { runInTransaction } from '../db/transaction';
import type { SignedActor } from '../accounts/common';
import type { AccountStore, Role } from '../accounts/store';
import type { AuditLog } from '../accounts/audit';
import type { Members } from '../accounts/members';
import type { ConversationStore } from '../conversations/store';
import type { InboxRecorder } from '../inbox/activity';
import { checkContent } from '../messages/service';
import type { MessageFormat } from '../messages/store';
import { memberDisplayName } from '../visitors/display-name';
import { mentionedEmails } from './mentions';
import type { NoteStore, StoredNote } from './store';

/** How long after writing it the author may still change a note's text (deleting it has no limit). */
export const NOTE_EDIT_WINDOW_MS = 24 * 3600_000;
/** Notes one timeline page shows at most (the oldest of its window of time). */
export const NOTES_PER_TIMELINE_PAGE = 500;

/** A note as members read it (openapi/manage.yaml, `Note`). */
export interface NoteDto {
  id: string;
  conversationId: string;
  authorId: string;
  authorName: string;
  content: string;
  format: MessageFormat;
  mentions: { accountId: string; name: string }[];
  createdAt: string;
  editedAt: string | null;
}

/**
 * Internal notes: what members write to each other in a conversation (issue 25, item 5). The
 * management entry has checked the caller's membership (`x-role: member`) before any of this runs.
 * Notes live in their own table (server/notes/store.ts) and reach members only: through these
 * operations, the inbox's live stream (feed rows written here, server/inbox/activity.ts) and the
 * conversation's timeline. They never touch the conversation (its `updatedAt` is public), never
 * count as unread, and are never an event of the outbox.
 */
export function createNotesService(deps: {
  db: Knex;
  store: NoteStore;
  conversations: Pick<ConversationStore, 'find'>;
  members: Pick<Members, 'list'>;
  accounts: Pick<AccountStore, 'namesOf'>;
  record: InboxRecorder;
  /** The inbox's search finds conversations by their notes (members only, like the inbox): written in the note's transaction. */
  search: Pick<SearchIndex, 'note' | 'noteRemoved'>;
  audit: AuditLog['record'];
  cursors: CursorCodec;
  now: () => number;
}) {
  const { store, cursors, now } = deps;

  async function conversationOf(siteId: string, id: string, trx?: Knex) {
    const row = await deps.conversations.find(siteId, id, trx);
    if (!row) throw notFound('Conversation');
    return row;
  }

  /** Notes as members read them: their authors and the members they mention by name, in one read of the accounts. */
  async function toDtos(notes: StoredNote[], trx?: Knex): Promise<NoteDto[]> {
    const ids = [...new Set(notes.flatMap((n) => [n.author_id, ...n.mentions]))];
    const names = await deps.accounts.namesOf(ids, trx);
    // An account is never deleted; a missing one (a damaged row) is shown, not thrown over.
    const nameOf = (id: string) => {
      const a = names.get(id);
      return a ? memberDisplayName(a) : 'A former member';
    };
    return notes.map((n) => ({
      id: n.id,
      conversationId: n.conversation_id,
      authorId: n.author_id,
      authorName: nameOf(n.author_id),
      content: n.content,
      format: n.format,
      mentions: n.mentions.map((accountId) => ({ accountId, name: nameOf(accountId) })),
      createdAt: toIsoRequired(n.created_at),
      editedAt: toIso(n.edited_at),
    }));
  }

  /**
   * The members of the site a text mentions by `@email` (not the writer: one does not call oneself),
   * as account ids in the order written, for each format (an edit keeps the note's format unless it
   * names one). An address that is no member of the site names nobody. Read before the change's
   * transaction: the members list is read outside it.
   */
  async function mentionsIn(siteId: string, authorId: string, content: string): Promise<Record<MessageFormat, string[]>> {
    const emails = { plain: mentionedEmails(content, 'plain'), markdown: mentionedEmails(content, 'markdown') };
    if (!emails.plain.length && !emails.markdown.length) return { plain: [], markdown: [] };
    const byEmail = new Map((await deps.members.list(siteId)).map((m) => [m.email, m.accountId]));
    const ids = (list: string[]) => [...new Set(list.map((e) => byEmail.get(e)).filter((id): id is string => id !== undefined && id !== authorId))];
    return { plain: ids(emails.plain), markdown: ids(emails.markdown) };
  }

  /** A note's change on the members' streams, and a `note.mentioned` for each member it newly calls (to them alone). */
  async function tell(
    trx: Knex.Transaction,
    where: { siteId: string; visitorId: string },
    kind: 'note.created' | 'note.updated',
    note: NoteDto,
    newlyMentioned: string[],
    by: string,
  ) {
    const change = { ...where, conversationId: note.conversationId };
    await deps.record(trx, { ...change, kind, accountId: by, body: note });
    for (const accountId of newlyMentioned) {
      await deps.record(trx, { ...change, kind: 'note.mentioned', accountId, body: { accountId, mentionedBy: by, note } });
    }
  }

  /** The note of the path, locked for the change; 404 for another conversation's or site's. */
  async function noteForChange(trx: Knex.Transaction, siteId: string, conversationId: string, noteId: string) {
    const conversation = await conversationOf(siteId, conversationId, trx);
    const note = await store.findForUpdate(trx, siteId, conversationId, noteId);
    if (!note) throw notFound('Note');
    return { conversation, note };
  }

  return {
    /** A conversation's notes, oldest first (`order=desc` newest first), keyset-paged like its messages. */
    async list(siteId: string, conversationId: string, query: { limit?: number; cursor?: string; order?: 'asc' | 'desc' }) {
      await conversationOf(siteId, conversationId);
      const order = query.order ?? 'asc';
      const limit = query.limit ?? 25;
      const scope = { list: 'notes', conversationId, order };
      const after = query.cursor ? cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.page(siteId, conversationId, order, after, limit + 1);
      const page = toPage(rows, limit, (r) => r, cursors, scope);
      return { data: await toDtos(page.data), page: page.page };
    },

    /**
     * A new note by the signed-in member, on an open or a closed conversation. `withinTransaction`
     * records an Idempotency-Key's answer in the note's commit.
     */
    async create(
      actor: SignedActor,
      siteId: string,
      conversationId: string,
      input: { content: string; format: MessageFormat },
      withinTransaction?: (trx: Knex.Transaction, note: NoteDto) => Promise<void>,
    ): Promise<NoteDto> {
      checkContent(input.content, 0);
      const authorId = actor.manager.accountId;
      const mentions = (await mentionsIn(siteId, authorId, input.content))[input.format];
      return runInTransaction(deps.db, async (trx) => {
        const conversation = await conversationOf(siteId, conversationId, trx);
        const at = now();
        const row: StoredNote = {
          id: newId('note', at),
          site_id: siteId,
          conversation_id: conversationId,
          author_id: authorId,
          content: input.content,
          format: input.format,
          mentions,
          created_at: at,
          edited_at: null,
        };
        await store.insert(trx, row);
        await deps.search.note(trx, row);
        const [note] = await toDtos([row], trx);
        await tell(trx, { siteId, visitorId: conversation.visitor_id }, 'note.created', note, mentions, authorId);
        if (withinTransaction) await withinTransaction(trx, note);
        return note;
      });
    },

    /**
     * The author changes their note's text within NOTE_EDIT_WINDOW_MS of writing it (then it is part
     * of the record: 409 conflict); anyone else, 403. Members it newly mentions are notified; those it
     * no longer names are not un-notified.
     */
    async update(actor: SignedActor, siteId: string, conversationId: string, noteId: string, input: { content: string; format?: MessageFormat }) {
      checkContent(input.content, 0);
      const by = actor.manager.accountId;
      const named = await mentionsIn(siteId, by, input.content);
      return runInTransaction(deps.db, async (trx) => {
        const { conversation, note } = await noteForChange(trx, siteId, conversationId, noteId);
        if (note.author_id !== by) throw new ApiError('forbidden', 'Only its author may edit a note.');
        if (now() - note.created_at > NOTE_EDIT_WINDOW_MS)
          throw new ApiError('conflict', 'A note can be edited for 24 hours after it was written; write a new one.');
        const format = input.format ?? note.format;
        const mentions = named[format];
        const changed: StoredNote = { ...note, content: input.content, format, mentions, edited_at: Math.max(now(), note.created_at) };
        await store.update(trx, note.id, changed);
        await deps.search.note(trx, changed);
        const [dto] = await toDtos([changed], trx);
        const newly = mentions.filter((id) => !note.mentions.includes(id));
        await tell(trx, { siteId, visitorId: conversation.visitor_id }, 'note.updated', dto, newly, by);
        return dto;
      });
    },

    /** Its author deletes a note at any time, an owner any note (a note with a secret pasted in it); audited either way. */
    async remove(actor: SignedActor, role: Role, siteId: string, conversationId: string, noteId: string): Promise<void> {
      const by = actor.manager.accountId;
      await runInTransaction(deps.db, async (trx) => {
        const { conversation, note } = await noteForChange(trx, siteId, conversationId, noteId);
        if (note.author_id !== by && role !== 'owner') throw new ApiError('forbidden', 'Only its author or an owner of the site may delete a note.');
        await store.remove(trx, note.id);
        await deps.search.noteRemoved(trx, note.id);
        await deps.record(trx, {
          siteId,
          visitorId: conversation.visitor_id,
          conversationId,
          kind: 'note.deleted',
          accountId: by,
          body: { id: note.id, conversationId, deletedBy: by },
        });
        await deps.audit(actor, [siteId], 'note.deleted', note.id, trx);
      });
    },

    /** The notes a timeline page shows: those written from `from` to `to`, oldest first, at most NOTES_PER_TIMELINE_PAGE. */
    async between(siteId: string, conversationId: string, from: number, to: number): Promise<NoteDto[]> {
      return toDtos(await store.between(siteId, conversationId, from, to, NOTES_PER_TIMELINE_PAGE));
    },
  };
}
