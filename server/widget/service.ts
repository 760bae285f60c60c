import type { Knex } from 'knex';
import { newId } from '../platform/ids';
import { ApiError, notFound } from '../platform/errors';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { ConversationRow, ConversationStore } from '../conversations/store';
import { conversationToDto } from '../conversations/store';
import type { MessageService, NewMessage } from '../messages/service';
import { checkContent } from '../messages/service';
import type { MediaService, IncomingFile } from '../media/service';
import type { MessageFormat } from '../messages/store';
import { emitEvent } from '../events/outbox';

const VISITOR_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The chat window's path into a conversation (and the `visitor say` CLI command, which must
 * behave exactly like it). A visitor has at most one open conversation per site, enforced by the
 * unique index conversations_one_open_per_visitor: simultaneous first messages race on the insert,
 * one wins, the others retry and append to the winner's conversation. After a close the next
 * message starts a new conversation; the closed one stays closed.
 */
export function createWidgetService(deps: {
  db: Knex;
  conversations: ConversationStore;
  messages: MessageService;
  media: MediaService;
  now: () => number;
  onEvents?: () => void;
}) {
  const { db, conversations, messages, media, now } = deps;

  return {
    async visitorSay(siteId: string, visitorId: string, content: string, opts: { files?: IncomingFile[]; format?: MessageFormat } = {}) {
      if (!VISITOR_ID.test(visitorId)) throw new ApiError('invalid_request', 'A visitor id is 1 to 128 printable ASCII characters without spaces.');
      const input: NewMessage = {
        direction: 'incoming',
        origin: 'widget',
        apiKeyId: null,
        content,
        format: opts.format ?? 'plain',
        files: opts.files ?? [],
      };
      checkContent(input.content, input.files.length);
      const files = await media.persist(siteId, input.files);
      try {
        for (let attempt = 1; ; attempt++) {
          try {
            const result = await runInTransaction(db, async (trx) => {
              let conversation = await conversations.findOpenForVisitor(trx, siteId, visitorId);
              let started = false;
              if (!conversation) {
                const at = now();
                const row: ConversationRow = {
                  id: newId('conv', at),
                  site_id: siteId,
                  visitor_id: visitorId,
                  state: 'open',
                  open_marker: 1,
                  created_at: at,
                  updated_at: at,
                  last_message_at: null,
                  closed_at: null,
                };
                await conversations.insert(trx, row);
                conversation = row;
                started = true;
              }
              const appended = await messages.appendInTransaction(trx, conversation, input, files);
              if (started) {
                await emitEvent(
                  trx,
                  { siteId, name: 'conversation.started', conversation: appended.conversationDto, message: appended.message },
                  appended.conversation.updated_at,
                );
              }
              return { conversation: appended.conversationDto, message: appended.message, started };
            });
            deps.onEvents?.();
            return result;
          } catch (err) {
            // Another message of the same visitor started the conversation first: join it.
            if (isUniqueViolation(err) && attempt < 5) continue;
            throw err;
          }
        }
      } catch (err) {
        await media.discard(files);
        throw err;
      }
    },

    /** An agent answering from a messenger: an outgoing message with origin `messenger`. */
    async agentSay(conversationId: string, content: string, format: MessageFormat = 'plain') {
      const conversation = await conversations.findById(conversationId);
      if (!conversation) throw notFound('Conversation');
      const result = await messages.reply(conversation.site_id, conversationId, {
        direction: 'outgoing',
        origin: 'messenger',
        apiKeyId: null,
        content,
        format,
        files: [],
      });
      return { conversation: result.conversationDto, message: result.message };
    },

    conversationToDto,
  };
}

export type WidgetService = ReturnType<typeof createWidgetService>;
