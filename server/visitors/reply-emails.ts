import type { Knex } from 'knex';
import type { QuotedMessage } from '../mail/templates';
import { runInTransaction } from '../db/transaction';
import type { DeliveryProvider, DeliveryWorker, JobWorkerOptions } from '../delivery/engine';
import { createJobWorker } from '../delivery/engine';
import { retrySchedule } from '../delivery/retry-schedule';
import { invalid } from '../platform/errors';
import { toIso } from '../platform/time';
import type { AuditActor, AuditLog } from '../accounts/audit';
import type { AccessStore } from '../access/store';
import type { ConversationStore } from '../conversations/store';
import type { MessageStore } from '../messages/store';
import type { MailQueue } from '../mail/queue';
import type { Presence } from '../inbox/presence';
import type { Outbox } from '../webhooks/outbox';
import type { SeenStore } from '../window/seen-store';
import type { ReplyAuthors } from '../window/authors';
import { checkBusinessHours, isOpen, nextOpening, type BusinessHours, type HoursChange } from '../sites/business-hours';
import type { BusinessHoursStore } from '../sites/business-hours-store';
import type { VisitorContext } from './context';
import type { VisitorContextStore } from './context-store';
import type { VisitorStore } from './store';
import { decideReplyEmail, noticeDueAt, REPLY_EMAIL_DELAY_MS, REPLY_EMAIL_MESSAGES, replyEmailState, subscribed, unseenReplies } from './reply-email-rules';
import { type ReplyNoticeClaim, type ReplyNoticeStore } from './reply-notice-store';

/** Longest a quoted message runs in the email. */
const QUOTE_CHARS = 500;

/**
 * Visitors told of late replies (issue 26, item 4; docs/window.md "Away", docs/email.md): the
 * site's business hours, what the window says when nobody can answer now, the visitor's email left
 * for replies, and the replies emailed when the window did not show them (reply-email-rules.ts).
 */
export function createReplyEmails(deps: {
  db: Knex;
  hours: BusinessHoursStore;
  presence: Pick<Presence, 'online'>;
  visitors: Pick<VisitorStore, 'find' | 'unsubscribeReplyEmails'>;
  context: Pick<VisitorContext, 'updateDetails'>;
  contextStore: Pick<VisitorContextStore, 'lastPage'>;
  notices: ReplyNoticeStore;
  conversations: Pick<ConversationStore, 'find'>;
  messages: Pick<MessageStore, 'page'>;
  seen: Pick<SeenStore, 'find'>;
  authors: Pick<ReplyAuthors, 'ofMessages'>;
  sites: Pick<AccessStore, 'findSite'>;
  mail: MailQueue;
  audit: AuditLog['record'];
  /** The visitor's one-click unsubscribe link (services.unsubscribe). */
  unsubscribeUrl: (siteId: string, visitorId: string) => string;
  now: () => number;
}) {
  const { db, now } = deps;

  /** A due notice: the email queued and the notice ended in one transaction, or the reason none is sent. */
  async function handle(claim: ReplyNoticeClaim): Promise<string | null> {
    const { notice } = claim;
    const [visitor, conversation, seen, site, newestFirst] = await Promise.all([
      deps.visitors.find(notice.site_id, notice.visitor_id),
      deps.conversations.find(notice.site_id, notice.conversation_id),
      deps.seen.find(notice.site_id, notice.conversation_id),
      deps.sites.findSite(notice.site_id),
      deps.messages.page(notice.site_id, notice.conversation_id, 'desc', undefined, REPLY_EMAIL_MESSAGES),
    ]);
    const mark = seen && { createdAt: seen.message_created_at, id: seen.message_id };
    const unseen = unseenReplies(
      newestFirst.map((m) => ({ createdAt: m.created_at, id: m.id, direction: m.direction })),
      mark,
    );
    const decision = conversation
      ? decideReplyEmail({ visitor, unseen: unseen.length })
      : { send: false as const, reason: 'not sent: the conversation was deleted' };
    const at = now();
    if (!decision.send || !subscribed(visitor)) {
      await runInTransaction(db, (trx) => deps.notices.endHeld(trx, claim, decision.send ? null : decision.reason, at));
      return decision.send ? null : decision.reason;
    }
    const messages = [...newestFirst].reverse();
    const names = await deps.authors.ofMessages(
      notice.site_id,
      messages.map((m) => ({ direction: m.direction, authorId: m.author_id })),
    );
    const siteName = site?.name ?? 'Support';
    // Quoted as the window shows them (templates.ts renders the markdown safely), each cut at QUOTE_CHARS.
    const quoted: QuotedMessage[] = messages.map((m, i) => ({
      author: names[i] ?? 'You',
      content: m.content.length > QUOTE_CHARS ? `${m.content.slice(0, QUOTE_CHARS)}…` : m.content,
      format: m.format,
    }));
    const page = await deps.contextStore.lastPage(notice.conversation_id);
    await runInTransaction(db, async (trx) => {
      if (!(await deps.notices.endHeld(trx, claim, null, at))) throw new Error('the notice was claimed again meanwhile');
      await deps.mail.enqueue(
        trx,
        {
          siteId: notice.site_id,
          to: visitor.email,
          template: 'notification',
          values: {
            subject: `New reply from ${siteName}`,
            body: `${siteName} replied to your conversation:`,
            messages: JSON.stringify(quoted),
            footer: 'Reply in the chat on the page, or just wait: we will email you again when there is a new answer.',
            url: page?.url ?? '',
            actionLabel: 'Back to the conversation',
            unsubscribeUrl: deps.unsubscribeUrl(notice.site_id, notice.visitor_id),
          },
        },
        at,
      );
    });
    return null;
  }

  return {
    hours: (siteId: string): Promise<BusinessHours> => deps.hours.find(siteId),

    /**
     * An owner sets the site's hours and away message (checked: zone, ranges); audited as
     * `site.business_hours_changed`. `awayWhenNoAgentOnline` left out keeps the site's, so a client
     * that does not know it never turns it back on.
     */
    async updateHours(actor: AuditActor, siteId: string, input: HoursChange): Promise<BusinessHours> {
      return runInTransaction(db, async (trx) => {
        const awayWhenNoAgentOnline = input.awayWhenNoAgentOnline ?? (await deps.hours.find(siteId, trx)).awayWhenNoAgentOnline;
        const hours = checkBusinessHours({ ...input, awayWhenNoAgentOnline });
        await deps.hours.save(trx, siteId, hours, now());
        await deps.audit(actor, [siteId], 'site.business_hours_changed', siteId, trx);
        return hours;
      });
    },

    /**
     * What the window shows its visitor: `online` when inside the hours and a member has the inbox
     * open; else `away`, why, when the hours next open, the away message, and whether replies are
     * emailed to this visitor.
     */
    async availability(siteId: string, visitorId: string) {
      const at = now();
      const [hours, online, visitor] = await Promise.all([deps.hours.find(siteId), deps.presence.online(siteId), deps.visitors.find(siteId, visitorId)]);
      const open = isOpen(hours, at);
      const reason = !open ? ('closed' as const) : online.size === 0 && hours.awayWhenNoAgentOnline ? ('no_agent_online' as const) : null;
      return {
        state: reason ? ('away' as const) : ('online' as const),
        reason,
        nextOpenAt: open ? null : toIso(nextOpening(hours, at)),
        awayMessage: reason ? hours.awayMessage : null,
        replyEmails: replyEmailState(visitor),
      };
    },

    /** The visitor leaves its email in the away form to be told of replies: kept unverified, with its consent. */
    async leaveEmail(siteId: string, visitorId: string, body: { email: string; consent: boolean }) {
      if (body.consent !== true) throw invalid('Tick the box to be emailed the replies.', [{ path: '/body/consent', message: 'must be true' }]);
      await deps.context.updateDetails(siteId, visitorId, { email: body.email.trim() }, { replyEmails: true });
      return { replyEmails: replyEmailState(await deps.visitors.find(siteId, visitorId)) };
    },

    /** Maintenance: notices that ended before `cutoff`, in batches; answers how many went. */
    async purge(cutoff: number): Promise<number> {
      let removed = 0;
      for (let n = -1; n !== 0; removed += n) n = await deps.notices.removeEndedBefore(cutoff);
      return removed;
    },

    /** One-click unsubscribe (services.unsubscribe): no more reply emails; agents still see the email, marked unsubscribed. */
    unsubscribe: (siteId: string, visitorId: string) => deps.visitors.unsubscribeReplyEmails(siteId, visitorId, now()),

    /** The worker of due notices: the delivery engine, so several instances never handle one twice. */
    worker(opts: JobWorkerOptions): DeliveryWorker {
      const provider: DeliveryProvider<ReplyNoticeClaim, { ok: boolean; error: string | null }, { error: string | null }> = {
        label: 'reply notice',
        kinds: [],
        // A failure is the database's (the email itself is the mail queue's to retry): a few tries, a minute apart and more.
        schedule: retrySchedule([60_000, 5 * 60_000, 30 * 60_000], (r: { ok: boolean }) => (r.ok ? 'delivered' : 'retry')),
        claimDue: (req) => deps.notices.claimDue(req),
        finishAttempts: (owner, outcomes) => deps.notices.finishAttempts(owner, outcomes),
        logInterrupted: async () => {},
        unsentReason: () => null,
        async send(claim) {
          let result: { ok: boolean; error: string | null };
          let note: string | null = null;
          try {
            note = await handle(claim);
            result = { ok: true, error: null };
          } catch (err) {
            result = { ok: false, error: String((err as Error).message).slice(0, 500) };
          }
          return { result, row: () => ({ error: result.error }), summary: { noticeId: claim.key, note, error: result.error } };
        },
      };
      return createJobWorker(provider, opts);
    },
  };
}

export type ReplyEmails = ReturnType<typeof createReplyEmails>;

/**
 * The outbox with reply notices beside it: an agent's reply to a subscribed visitor starts one in
 * the reply's transaction (none when one is pending: that email will carry this reply too).
 */
export function withReplyNotices(
  outbox: Outbox,
  deps: { visitors: Pick<VisitorStore, 'find'>; notices: Pick<ReplyNoticeStore, 'start'>; delayMs?: number },
): Outbox {
  const delayMs = deps.delayMs ?? REPLY_EMAIL_DELAY_MS;
  return {
    async emit(trx, input, at) {
      const event = await outbox.emit(trx, input, at);
      if (input.name === 'message.created' && input.message?.direction === 'outgoing') {
        const { id: conversationId, visitorId } = input.conversation;
        const visitor = input.visitor ?? (await deps.visitors.find(input.siteId, visitorId, trx));
        if (subscribed(visitor)) {
          await deps.notices.start(trx, { siteId: input.siteId, conversationId, visitorId }, at, noticeDueAt(at, delayMs));
        }
      }
      return event;
    },
  };
}
