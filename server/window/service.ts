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
import type { Message, MessageFormat, MessageStore } from '../messages/store';
import type { Outbox } from '../webhooks/outbox';
import type { AgentAlerts } from '../agent-alerts/service';
import type { MediaStore } from '../media/store';
import type { VisitorFiles } from '../media/visitor-files';
import { sha256Hex } from '../platform/crypto';
import type { WindowStore } from './store';

/** A visitor id: the gateway's `vis_…` and `user:…` ids, or whatever `visitor say` was given. */
export const VISITOR_ID = /^[\x21-\x7e]{1,128}$/;
/** The chat window's own id for a message it sends (a UUID, say): unique per visitor. */
export const CLIENT_MESSAGE_ID = /^[\x21-\x7e]{1,64}$/;

/**
 * The chat window's path into a conversation (and the `visitor say` CLI command, which must
 * behave exactly like it). A visitor has at most one open conversation per site, enforced by the
 * unique index conversations_one_open_per_visitor: simultaneous first messages race on the insert,
 * one wins, the others retry and append to the winner's conversation. After a close the next
 * message starts a new conversation; the closed one stays closed.
 */
export function createWindowChat(deps: {
  db: Knex;
  conversations: ConversationStore;
  messages: MessageService;
  messageStore: MessageStore;
  media: MediaService;
  mediaStore: MediaStore;
  visitorFiles: VisitorFiles;
  window: WindowStore;
  now: () => number;
  outbox: Outbox;
  /** Members away from the inbox are told of a waiting visitor, in the message's transaction. */
  alerts?: Pick<AgentAlerts, 'onVisitorMessage'>;
}) {
  const { db, conversations, messages, media, now } = deps;

  /**
   * The message a client message id already made, as first answered (its conversation as it is
   * now); a reuse of the id for another text is refused like a reused Idempotency-Key.
   */
  async function replayOf(trx: Knex, siteId: string, visitorId: string, clientMessageId: string, requestHash: string) {
    const known = await deps.window.findClientMessage(trx, siteId, visitorId, clientMessageId);
    if (!known) return null;
    if (known.request_hash !== requestHash) {
      throw new ApiError('idempotency_key_reused', 'This clientMessageId was already used for another message; make a new one for each message.');
    }
    return known.message_id;
  }

  /**
   * The visitor's answer carries links for the window (its own origin when WINDOW_PUBLIC_URL is
   * set), while the message and its events are written with the API's links: event receivers
   * fetch files from the API's host, visitors from the window's.
   */
  const forWindow = (message: Message): Message =>
    message.attachments.length ? { ...message, attachments: message.attachments.map((a) => ({ ...a, url: media.signedUrl(a.id) })) } : message;

  async function replayAnswer(messageId: string) {
    const row = (await deps.messageStore.findById(messageId))!;
    const conversation = (await conversations.findById(row.conversation_id))!;
    const attachments = await deps.mediaStore.forMessages([row.id]);
    return { conversation: conversationToDto(conversation), message: forWindow(messages.toDto(row, attachments)), started: false, replayed: true };
  }

  return {
    /**
     * A visitor's message. With `clientMessageId` a resend (after a reload, a reconnect, a lost
     * answer) returns the message the first send made, with `replayed: true`, and posts nothing:
     * the id is stored in the same transaction as the message under a unique key, so even
     * simultaneous resends make one message.
     */
    async visitorSay(
      siteId: string,
      visitorId: string,
      content: string,
      opts: { files?: IncomingFile[]; format?: MessageFormat; clientMessageId?: string } = {},
    ) {
      if (!VISITOR_ID.test(visitorId)) throw new ApiError('invalid_request', 'A visitor id is 1 to 128 printable ASCII characters without spaces.');
      const clientMessageId = opts.clientMessageId;
      if (clientMessageId !== undefined && !CLIENT_MESSAGE_ID.test(clientMessageId)) {
        throw new ApiError('invalid_request', 'clientMessageId is 1 to 64 printable ASCII characters without spaces.', [
          { path: '/body/clientMessageId', message: 'must be 1 to 64 printable ASCII characters' },
        ]);
      }
      const input: NewMessage = {
        direction: 'incoming',
        origin: 'widget',
        apiKeyId: null,
        content,
        format: opts.format ?? 'plain',
        files: opts.files ?? [],
      };
      checkContent(input.content, input.files.length);
      const requestHash = sha256Hex(JSON.stringify({ content: input.content, format: input.format }));
      if (clientMessageId !== undefined) {
        // A resend is answered before its files are stored again.
        const known = await replayOf(db, siteId, visitorId, clientMessageId, requestHash);
        if (known) return replayAnswer(known);
      }
      // The site's setting, whichever way the files came (the window checked it before they were written).
      await deps.visitorFiles.checkFiles(
        siteId,
        input.files.map((f) => f.mimeType),
      );
      const files = await media.persist(siteId, input.files);
      const fileBytes = files.reduce((sum, f) => sum + f.size, 0);
      try {
        for (let attempt = 1; ; attempt++) {
          try {
            const result = await runInTransaction(db, async (trx) => {
              if (clientMessageId !== undefined) {
                const known = await replayOf(trx, siteId, visitorId, clientMessageId, requestHash);
                if (known) return { replayOf: known };
              }
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
                await deps.outbox.emit(
                  trx,
                  { siteId, name: 'conversation.started', conversation: appended.conversationDto, message: appended.message },
                  appended.conversation.updated_at,
                );
              }
              await deps.alerts?.onVisitorMessage(trx, { siteId, conversationId: conversation.id, started, at: appended.conversation.updated_at });
              if (clientMessageId !== undefined) {
                await deps.window.insertClientMessage(trx, {
                  site_id: siteId,
                  visitor_id: visitorId,
                  client_message_id: clientMessageId,
                  message_id: appended.message.id,
                  request_hash: requestHash,
                  created_at: appended.conversation.updated_at,
                });
              }
              // Last in the transaction, so the site's quota row is locked only until the commit.
              if (files.length) await deps.visitorFiles.charge(trx, siteId, fileBytes);
              return { answer: { conversation: appended.conversationDto, message: appended.message, started, replayed: false } };
            });
            if ('replayOf' in result && result.replayOf !== undefined) {
              await media.discard(files);
              return replayAnswer(result.replayOf);
            }
            return { ...result.answer, message: forWindow(result.answer.message) };
          } catch (err) {
            // Another message of the same visitor started the conversation first: join it. Or a
            // resend with the same client message id committed first: the next attempt finds it.
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

export type WindowChat = ReturnType<typeof createWindowChat>;
