import type { Knex } from 'knex';
import { invalid } from '../platform/errors';
import { runInTransaction } from '../db/transaction';
import type { AuditActor, AuditLog } from '../accounts/audit';
import type { ConversationStore } from '../conversations/store';
import type { MessageStore } from '../messages/store';
import type { MediaStore, AttachmentRow } from '../media/store';
import type { VisitorFiles } from '../media/visitor-files';
import type { WindowStore } from '../window/store';
import { VISITOR_ID } from '../window/service';
import type { VisitorStore } from './store';
import type { VisitorContextStore } from './context-store';

/**
 * Something kept per conversation that goes with a visitor's data: each owning store's removal,
 * in the deletion's transaction. It removes at most `limit` rows where its rows per conversation
 * can be many (it may remove all when they are few) and answers how many went; it is called
 * again while it answers `limit` or more, so no transaction grows with the visitor's history.
 */
export interface ConversationDataPart {
  /** What it is, in the deletion's answer (`removed.<name>`). */
  name: string;
  removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[], limit: number): Promise<number>;
}

/** Conversations taken per round, and messages (with their files) per transaction. */
export const CONVERSATIONS_PER_ROUND = 20;
export const MESSAGES_PER_BATCH = 500;

export interface DeletionResult {
  siteId: string;
  visitorId: string;
  removed: Record<string, number>;
}

/**
 * Deleting a visitor's data (docs/window.md, "Deleting a visitor's data"), as a site's owner must
 * when the visitor asks: its conversations with their messages, files (rows and stored files),
 * context, and every part another feature keeps per conversation (`parts`), then its name, email
 * and attributes. No event is emitted: integrations keep their own copies.
 *
 * A visitor with a long history is removed in bounded steps: a round takes up to 20 of its
 * conversations; their parts go in batches, then their messages 500 at a time (each batch one
 * short transaction that also removes the messages' files' rows, gives visitor files' bytes back
 * to the site's quota, and removes the files after the commit), then the conversations themselves,
 * locked and checked empty first (a message written meanwhile sends the round round again). Each
 * transaction reads committed rows only, so no gap lock holds the site's other writers. Every step
 * removes what is still there, so a run cut short (a killed process, a lost database) is finished
 * by running it again; the audit entry (`visitor.data_deleted`) is written by the last step, with
 * the visitor's own rows.
 */
export function createVisitorDeletion(deps: {
  db: Knex;
  conversations: Pick<ConversationStore, 'ofVisitor' | 'removeMany' | 'findForUpdate'>;
  messages: Pick<MessageStore, 'someOf' | 'removeMany'>;
  media: Pick<MediaStore, 'removeForMessages'>;
  /** Removes stored files once their rows are gone (the media service's `discard`). */
  discardFiles: (rows: AttachmentRow[]) => Promise<void>;
  visitorFiles: Pick<VisitorFiles, 'release'>;
  window: Pick<WindowStore, 'removeForMessages' | 'removeForVisitor'>;
  visitors: Pick<VisitorStore, 'remove'>;
  context: Pick<VisitorContextStore, 'removeVisitor'>;
  parts: ConversationDataPart[];
  audit: AuditLog['record'];
  /** Messages (and rows of a part) per transaction; MESSAGES_PER_BATCH unless a test asks for fewer. */
  batch?: number;
}) {
  const { db } = deps;
  const BATCH = deps.batch ?? MESSAGES_PER_BATCH;
  const tx = <T>(work: (trx: Knex.Transaction) => Promise<T>) => runInTransaction(db, work, { isolation: 'read committed' });

  /** One part's rows of these conversations, in batches. */
  async function drainPart(part: ConversationDataPart, siteId: string, ids: string[], removed: Record<string, number>) {
    for (;;) {
      const n = await tx((trx) => part.removeForConversations(trx, siteId, ids, BATCH));
      removed[part.name] = (removed[part.name] ?? 0) + n;
      if (n < BATCH) return;
    }
  }

  /** The messages of these conversations with their files, a batch per transaction; the files after each commit. */
  async function drainMessages(siteId: string, visitorId: string, ids: string[], removed: Record<string, number>) {
    for (;;) {
      const { files, count } = await tx(async (trx) => {
        const batch = await deps.messages.someOf(trx, siteId, ids, BATCH);
        if (!batch.length) return { files: [] as AttachmentRow[], count: 0 };
        const messageIds = batch.map((m) => m.id);
        const files = await deps.media.removeForMessages(trx, messageIds);
        const incoming = new Set(batch.filter((m) => m.direction === 'incoming').map((m) => m.id));
        const bytes = files.filter((f) => f.message_id !== null && incoming.has(f.message_id)).reduce((sum, f) => sum + f.size, 0);
        if (bytes > 0) await deps.visitorFiles.release(trx, siteId, bytes);
        await deps.window.removeForMessages(trx, siteId, visitorId, messageIds);
        return { files, count: await deps.messages.removeMany(trx, messageIds) };
      });
      // After the commit: a crash before this leaves files without rows, which maintenance removes.
      await deps.discardFiles(files);
      removed.messages += count;
      removed.files += files.length;
      if (count < BATCH) return;
    }
  }

  return {
    async deleteVisitor(actor: AuditActor, siteId: string, visitorId: string): Promise<DeletionResult> {
      if (!VISITOR_ID.test(visitorId)) {
        throw invalid('A visitor id is 1 to 128 printable ASCII characters without spaces.', [{ path: '/body/visitorId', message: 'not a visitor id' }]);
      }
      const removed: Record<string, number> = { conversations: 0, messages: 0, files: 0, attributes: 0, visitor: 0 };
      for (const part of deps.parts) removed[part.name] = 0;
      for (;;) {
        const round = await deps.conversations.ofVisitor(siteId, visitorId, CONVERSATIONS_PER_ROUND);
        if (!round.length) break;
        const ids = round.map((c) => c.id);
        for (const part of deps.parts) await drainPart(part, siteId, ids, removed);
        await drainMessages(siteId, visitorId, ids, removed);
        // The conversations, once nothing is left in them: locked, so a message being written
        // to one either committed before (and is found here) or waits and then finds it gone.
        removed.conversations += await tx(async (trx) => {
          for (const id of ids) await deps.conversations.findForUpdate(trx, siteId, id);
          if ((await deps.messages.someOf(trx, siteId, ids, 1)).length) return 0; // written meanwhile: another round
          for (const part of deps.parts) removed[part.name] += await part.removeForConversations(trx, siteId, ids, BATCH);
          return deps.conversations.removeMany(trx, siteId, ids);
        });
      }
      await tx(async (trx) => {
        await deps.window.removeForVisitor(trx, siteId, visitorId);
        removed.attributes += Number(await deps.context.removeVisitor(trx, siteId, visitorId));
        removed.visitor += (await deps.visitors.remove(siteId, visitorId, trx)) ? 1 : 0;
        await deps.audit(actor, [siteId], 'visitor.data_deleted', visitorId, trx);
      });
      return { siteId, visitorId, removed };
    },
  };
}

export type VisitorDeletion = ReturnType<typeof createVisitorDeletion>;
