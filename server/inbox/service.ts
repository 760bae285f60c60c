import type { Knex } from 'knex';
import { ApiError, invalid, notFound } from '../platform/errors';
import { toIso, toIsoRequired } from '../platform/time';
import { runInTransaction } from '../db/transaction';
import type { Manager, SignedActor } from '../accounts/common';
import type { Members } from '../accounts/members';
import type { Role } from '../accounts/store';
import type { AuditLog } from '../accounts/audit';
import type { ConversationService } from '../conversations/service';
import type { ConversationStore, InboxRow } from '../conversations/store';
import type { MessageService } from '../messages/service';
import type { Message, MessageFormat } from '../messages/store';
import type { IncomingFile } from '../media/service';
import type { StreamEvent, StreamSource } from '../window/streams';
import type { Logger } from '../platform/logger';
import type { InboxStore } from './store';
import type { InboxHub } from './live';
import type { Presence } from './presence';
import { PRIVATE_TO_ACCOUNT, type InboxRecorder } from './activity';
import { knownNameOf } from '../visitors/store';
import type { AccountStore } from '../accounts/store';
import type { Tags } from '../tags/service';
import type { TagOnConversation } from '../tags/store';
import { rowSummary } from './rows';

import type { operations } from '../manage/generated/api';

export type InboxQuery = NonNullable<operations['listInboxConversations']['parameters']['query']>;
type Signed = SignedActor;

/** A stream resuming from a position no longer in the feed (kept this long) starts at its end. */
export const INBOX_ACTIVITY_RETENTION_MS = 7 * 24 * 3600_000;

/**
 * Who may assign: an owner, anyone of the site (or nobody); an agent, only themselves, and may
 * unassign only a conversation assigned to themselves. Pure, for the service and its tests.
 */
export function assignmentRefusal(role: 'owner' | 'agent', actorId: string, current: string | null, next: string | null): string | null {
  if (role === 'owner') return null;
  if (next === actorId) return null;
  if (next === null && current === actorId) return null;
  return 'An agent may assign a conversation to themselves, or unassign it from themselves; owners assign anyone.';
}

/**
 * The inbox's rules for a member of the site. The management entry has checked the membership
 * (`x-role: member`, server/manage/roles.ts) before any of these runs; `assign` takes the role it
 * found. A live stream asks again while it runs (`members.refusalOf`).
 */
export function createInboxService(deps: {
  db: Knex;
  store: InboxStore;
  members: Pick<Members, 'find' | 'refusalOf'>;
  audit: AuditLog['record'];
  conversations: ConversationService;
  conversationStore: ConversationStore;
  messages: MessageService;
  /** Private changes (assignments, read marks) to the site's feed, in the change's transaction. */
  record: InboxRecorder;
  hub: InboxHub;
  /** Who has a live inbox stream open on a site (members without one are emailed of waiting visitors). */
  presence: Pick<Presence, 'open'>;
  /** What a row shows beside the card that the page does not join: the members' names and the tags, each read once a page. */
  rows: { accounts: Pick<AccountStore, 'namesOf'>; tags: Pick<Tags, 'pagePart'> };
  now: () => number;
}) {
  const { db, store, conversationStore, now } = deps;

  /**
   * The conversations as the member sees them: the public card with its assignee, unread count and
   * read mark, and what the row says is waiting (server/inbox/rows.ts). The rows come with the
   * member's marks and the visitors' names joined; the unread counts and the tags are one more
   * statement, and the members' names one more only when a member wrote the last message or answer.
   * Each row is built as one object: spreading parts of it was garbage the page's profile showed.
   */
  async function withInbox(siteId: string, accountId: string, rows: InboxRow[]) {
    if (!rows.length) return [];
    const marks = new Map<string, number>();
    const ids: string[] = [];
    const authors: string[] = [];
    for (const r of rows) {
      ids.push(r.id);
      if (r.read_at !== null) marks.set(r.id, r.read_at);
      if (r.last_author_id !== null) authors.push(r.last_author_id);
      if (r.answered_by !== null) authors.push(r.answered_by);
    }
    const tagPart = deps.rows.tags.pagePart;
    const [counted, names] = await Promise.all([
      store.unreadCountsWith<TagOnConversation>(accountId, ids, marks, { part: tagPart, siteId }),
      deps.rows.accounts.namesOf(authors),
    ]);
    const tags = tagPart.read(counted.beside);
    return rows.map((r) => {
      const summary = rowSummary(r, { viewer: accountId, visitor: knownNameOf(r), names });
      return {
        id: r.id,
        state: r.state,
        visitorId: r.visitor_id,
        createdAt: toIsoRequired(r.created_at),
        updatedAt: toIsoRequired(r.updated_at),
        lastMessageAt: toIso(r.last_message_at),
        closedAt: toIso(r.closed_at),
        assigneeId: r.assignee_id ?? null,
        unreadCount: counted.counts.get(r.id) ?? 0,
        lastReadAt: toIso(r.read_at),
        visitorName: summary.visitorName,
        visitorNameSource: summary.visitorNameSource,
        lastMessage: summary.lastMessage,
        waitingSince: summary.waitingSince,
        lastAnswer: summary.lastAnswer,
        tags: tags.get(r.id) ?? [],
      };
    });
  }

  async function conversationOf(siteId: string, id: string) {
    const row = await conversationStore.find(siteId, id);
    if (!row) throw notFound('Conversation');
    return row;
  }

  /** The member's read mark up to the conversation's newest message, in `trx`. */
  async function markReadIn(trx: Knex.Transaction, accountId: string, siteId: string, conversation: { id: string; visitor_id: string }) {
    const newest = await store.newestMessage(conversation.id, trx);
    const at = now();
    const mark = await store.markRead(trx, {
      account_id: accountId,
      conversation_id: conversation.id,
      site_id: siteId,
      last_read_at: newest?.created_at ?? 0,
      last_read_message_id: newest?.id ?? null,
      updated_at: at,
    });
    const dto = { conversationId: conversation.id, accountId, lastReadAt: toIso(mark.last_read_at), lastReadMessageId: mark.last_read_message_id };
    await deps.record(trx, { siteId, visitorId: conversation.visitor_id, kind: 'conversation.read', conversationId: conversation.id, accountId, body: dto });
    return dto;
  }

  const service = {
    async list(manager: Manager, siteId: string, query: InboxQuery) {
      const page = await deps.conversations.rowsForMember(siteId, query, manager.accountId);
      return { data: await withInbox(siteId, manager.accountId, page.data), page: page.page };
    },

    async get(manager: Manager, siteId: string, id: string) {
      const row = await conversationStore.findWithMarks(siteId, id, manager.accountId);
      if (!row) throw notFound('Conversation');
      return (await withInbox(siteId, manager.accountId, [row]))[0];
    },

    async messages(siteId: string, id: string, query: { limit?: number; cursor?: string; order?: 'asc' | 'desc' }) {
      return deps.messages.list(siteId, id, query);
    },

    /** Checked before an upload is spooled (after the caller's membership): the conversation. */
    async checkReply(siteId: string, id: string) {
      await conversationOf(siteId, id);
    },

    /**
     * A reply as the signed-in member, through the messages service like every reply: `origin`
     * `messenger` with `authorId`, `message.created` emitted. Replying reads the conversation: the
     * member's read mark moves to the reply in the same commit.
     */
    async reply(
      actor: Signed,
      siteId: string,
      id: string,
      input: { content: string; format: MessageFormat; files: IncomingFile[] },
      withinTransaction?: (trx: Knex.Transaction, message: Message) => Promise<void>,
    ) {
      const result = await deps.messages.reply(
        siteId,
        id,
        { direction: 'outgoing', origin: 'messenger', apiKeyId: null, authorId: actor.manager.accountId, ...input },
        async (trx, message) => {
          await markReadIn(trx, actor.manager.accountId, siteId, { id, visitor_id: (await conversationStore.find(siteId, id, trx))!.visitor_id });
          if (withinTransaction) await withinTransaction(trx, message);
        },
      );
      return result.message;
    },

    /** Closes through the conversations service (one `conversation.closed`); audited when this call closed it. */
    async close(actor: Signed, siteId: string, id: string) {
      await deps.conversations.close(siteId, id, (trx, card) => deps.audit(actor, [siteId], 'conversation.closed', card.id, trx).then(() => undefined));
      return service.get(actor.manager, siteId, id);
    },

    async assign(actor: Signed, siteId: string, id: string, assigneeId: string | null, role: Role) {
      if (assigneeId !== null && !(await deps.members.find(assigneeId, siteId))) {
        throw invalid('The assignee is not a member of this site.', [{ path: '/body/assigneeId', message: 'must be a member of the site' }]);
      }
      await runInTransaction(db, async (trx) => {
        const row = await conversationStore.findForUpdate(trx, siteId, id);
        if (!row) throw notFound('Conversation');
        const current = row.assignee_id ?? null;
        const refusal = assignmentRefusal(role, actor.manager.accountId, current, assigneeId);
        if (refusal) throw new ApiError('forbidden', refusal);
        if (current === assigneeId) return;
        await conversationStore.setAssignee(trx, id, assigneeId);
        await deps.record(trx, {
          siteId,
          visitorId: row.visitor_id,
          kind: 'conversation.assigned',
          conversationId: id,
          accountId: actor.manager.accountId,
          body: { conversationId: id, assigneeId, assignedBy: actor.manager.accountId },
        });
        await deps.audit(actor, [siteId], assigneeId ? 'conversation.assigned' : 'conversation.unassigned', id, trx);
      });
      return service.get(actor.manager, siteId, id);
    },

    async markRead(manager: Manager, siteId: string, id: string) {
      const row = await conversationOf(siteId, id);
      return runInTransaction(db, (trx) => markReadIn(trx, manager.accountId, siteId, row));
    },

    /**
     * The member's live stream of the site's inbox, from `lastEventId` (a feed position) or from
     * now. Public events carry the event's `data` as delivered to event addresses; assignments go to
     * every member, a read mark only to its own member.
     */
    async stream(manager: Manager, siteId: string, lastEventId: string | undefined, logger: Logger): Promise<StreamSource<number>> {
      const tail = await store.tail(siteId);
      let from = tail;
      if (lastEventId !== undefined) {
        const n = /^\d{1,15}$/.test(lastEventId) ? Number(lastEventId) : NaN;
        if (!(n <= tail))
          throw invalid('Last-Event-ID is not an event id of this inbox; reconnect without it.', [
            { path: '/header/Last-Event-ID', message: 'unknown event id' },
          ]);
        from = n;
      }
      // A resume is exact only if every position after `from` is still in the feed: positions are
      // gapless, so a first row past `from + 1` (or none while the tail is ahead) means rows were
      // purged, and the client reloads its lists instead of trusting the events.
      let gap = false;
      if (from < tail) {
        const [first] = await store.after(siteId, from, 1);
        gap = !first || first.position > from + 1;
      }
      return {
        readyData: { tail: String(tail), gap },
        holderKey: manager.accountId,
        from,
        encode: String,
        async read(after, max) {
          const rows = await store.after(siteId, after, max);
          const events: StreamEvent[] = [];
          for (const r of rows) {
            if (PRIVATE_TO_ACCOUNT.has(r.kind) && r.account_id !== manager.accountId) continue;
            const data = r.event_id ? (r.event_body ? JSON.parse(r.event_body).data : null) : JSON.parse(r.body ?? 'null');
            if (data === null) continue; // its event has been purged
            events.push({ id: String(r.position), event: r.kind, data });
          }
          return { events, position: rows.length ? rows[rows.length - 1].position : after, more: rows.length >= max };
        },
        // The stream's lifetime is the member's presence on the site.
        subscribe: (listener) => {
          const unsubscribe = deps.hub.subscribe(siteId, listener);
          const leave = deps.presence.open(siteId, manager.accountId);
          return () => {
            unsubscribe();
            leave();
          };
        },
        // A member's own typing is not shown back to them.
        signals: (push) => deps.hub.subscribeSignals(siteId, (e) => (e.data as { accountId?: unknown }).accountId !== manager.accountId && push(e)),
        expiresAt: now() + 12 * 3600_000,
        endEvent: 'session-ended',
        busyMessage: 'Too many live inbox connections right now; retry later or page the list.',
        refusal: () => deps.members.refusalOf(manager, siteId),
        logger,
        now,
      };
    },

    /** Maintenance: feed rows past their week. */
    purge: (at = now()) => store.purgeActivity(at - INBOX_ACTIVITY_RETENTION_MS),
  };
  return service;
}

export type InboxService = ReturnType<typeof createInboxService>;
