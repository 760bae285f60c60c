import type { Knex } from 'knex';
import { newId } from '../platform/ids';
import { ApiError, invalid, notFound } from '../platform/errors';
import type { CursorCodec } from '../platform/cursor';
import { toPage } from '../platform/cursor';
import { toIsoRequired } from '../platform/time';
import { runInTransaction } from '../db/transaction';
import type { ConversationStore, ConversationRow } from '../conversations/store';
import { conversationToDto } from '../conversations/store';
import type { MediaService, IncomingFile } from '../media/service';
import type { MediaStore, AttachmentRow } from '../media/store';
import type { EmitInput, Outbox } from '../webhooks/outbox';
import type { SearchIndex } from '../search/service';
import { messagePreview } from '../inbox/preview';
import { mayHaveAttachments, type Message, type MessageFormat, type MessageRow, type MessageStore } from './store';

export const MAX_CONTENT_LENGTH = 10_000;
export const MAX_FILES = 10;
const NO_ATTACHMENTS: AttachmentRow[] = [];

export interface NewMessage {
  direction: MessageRow['direction'];
  origin: MessageRow['origin'];
  apiKeyId: string | null;
  /** The member who wrote it in the dashboard's inbox (origin `messenger`); absent for other writers. */
  authorId?: string | null;
  content: string;
  format: MessageFormat;
  files: IncomingFile[];
}

interface Deps {
  db: Knex;
  conversations: ConversationStore;
  messages: MessageStore;
  media: MediaService;
  mediaStore: MediaStore;
  cursors: CursorCodec;
  now: () => number;
  /** Where `message.created` is written, in the message's transaction. */
  outbox: Outbox;
  /** The inbox's search, written in the message's transaction: a message is found once it is committed. */
  search: Pick<SearchIndex, 'message'>;
}

/** Content rules shared by every way a message enters (API reply, chat window, messenger). */
export function checkContent(content: string, fileCount: number): void {
  if ([...content].length > MAX_CONTENT_LENGTH) {
    throw invalid(`content is longer than ${MAX_CONTENT_LENGTH} characters.`, [
      { path: '/body/content', message: `must NOT have more than ${MAX_CONTENT_LENGTH} characters` },
    ]);
  }
  if (content.trim() === '' && fileCount === 0) {
    throw invalid('content is empty; send text or attach at least one file.', [{ path: '/body/content', message: 'must not be empty without a file' }]);
  }
  if (fileCount > MAX_FILES) throw new ApiError('payload_too_large', `At most ${MAX_FILES} files may be attached to a message.`);
}

export function createMessageService(deps: Deps) {
  const { db, conversations, messages, media, mediaStore, cursors, now } = deps;

  function toDto(row: MessageRow, attachments: AttachmentRow[]): Message {
    return {
      id: row.id,
      conversationId: row.conversation_id,
      direction: row.direction,
      origin: row.origin,
      apiKeyId: row.api_key_id,
      authorId: row.author_id ?? null,
      content: row.content,
      format: row.format,
      attachments: attachments.map((a) => media.toDto(a)),
      createdAt: toIsoRequired(row.created_at),
    };
  }

  /** A page's messages with their files: one look-up, and none (not even a tick) when no message of the page may have files. */
  async function toDtos(rows: MessageRow[]): Promise<Message[]> {
    let withFiles: string[] | undefined;
    for (const r of rows) if (mayHaveAttachments(r)) (withFiles ??= []).push(r.id);
    if (!withFiles) return rows.map((r) => toDto(r, NO_ATTACHMENTS));
    const attachments = await mediaStore.forMessages(withFiles);
    return rows.map((r) => toDto(r, mayHaveAttachments(r) ? attachments.filter((a) => a.message_id === r.id) : NO_ATTACHMENTS));
  }

  const service = {
    toDto,

    async list(siteId: string, conversationId: string, query: { limit?: number; cursor?: string; order?: 'asc' | 'desc' }) {
      const order = query.order ?? 'asc';
      const limit = query.limit ?? 25;
      const scope = { list: 'messages', conversationId, order };
      const mustExist = async () => {
        if (!(await conversations.find(siteId, conversationId))) throw notFound('Conversation');
      };
      let after;
      try {
        after = query.cursor ? cursors.decode(query.cursor, scope) : undefined;
      } catch (err) {
        await mustExist(); // a missing conversation answers 404 before its cursor is judged
        throw err;
      }
      const rows = await messages.page(siteId, conversationId, order, after, limit + 1);
      // Only an empty page needs to know whether the conversation exists for this site: 404, or no more messages.
      if (rows.length === 0) await mustExist();
      const page = toPage(rows, limit, (r) => r, cursors, scope);
      return { data: await toDtos(page.data), page: page.page };
    },

    /**
     * Appends a message to a conversation inside `trx`: stores it, links its files, moves the
     * conversation's times and emits `message.created`. Files must already be persisted.
     */
    async appendInTransaction(
      trx: Knex.Transaction,
      conversation: ConversationRow,
      input: NewMessage,
      files: AttachmentRow[],
      /** What the caller read with its lock in `trx` already (EmitInput's eventAddress and visitor). */
      read?: Pick<EmitInput, 'eventAddress' | 'visitor'>,
    ) {
      const at = Math.max(now(), conversation.updated_at);
      const row: MessageRow = {
        id: newId('msg', at),
        conversation_id: conversation.id,
        site_id: conversation.site_id,
        direction: input.direction,
        origin: input.origin,
        api_key_id: input.apiKeyId,
        author_id: input.authorId ?? null,
        content: input.content,
        format: input.format,
        created_at: at,
        attachment_count: files.length,
      };
      await messages.insert(trx, row);
      const linked = files.map((f) => ({ ...f, message_id: row.id }));
      await mediaStore.insert(trx, linked);
      await conversations.touch(trx, conversation.id, at, {
        preview: messagePreview({ content: row.content, format: row.format, attachmentNames: files.map((f) => f.name) }),
        direction: row.direction,
        authorId: row.author_id,
        attachments: files.length,
      });
      await deps.search.message(trx, conversation, row);
      const updated: ConversationRow = { ...conversation, updated_at: at, last_message_at: at };
      const message = toDto(row, linked);
      const conversationDto = conversationToDto(updated);
      await deps.outbox.emit(trx, { siteId: conversation.site_id, name: 'message.created', conversation: conversationDto, message, ...read }, at);
      return { conversation: updated, conversationDto, message };
    },

    /**
     * A reply from the API (or an agent): refused on a closed conversation. `withinTransaction`
     * lets the caller record its answer (the idempotency record) in the same commit as the message.
     */
    async reply(siteId: string, conversationId: string, input: NewMessage, withinTransaction?: (trx: Knex.Transaction, message: Message) => Promise<void>) {
      checkContent(input.content, input.files.length);
      const files = await media.persist(siteId, input.files);
      try {
        return await runInTransaction(db, async (trx) => {
          const locked = await conversations.findForReply(trx, siteId, conversationId);
          if (!locked) throw notFound('Conversation');
          const { conversation, eventAddress, visitor } = locked;
          if (conversation.state === 'closed') throw new ApiError('conversation_closed', 'The conversation is closed; it takes no reply.');
          const appended = await service.appendInTransaction(trx, conversation, input, files, { eventAddress, visitor });
          if (withinTransaction) await withinTransaction(trx, appended.message);
          return appended;
        });
      } catch (err) {
        await media.discard(files);
        throw err;
      }
    },
  };
  return service;
}

export type MessageService = ReturnType<typeof createMessageService>;
