import type { Knex } from 'knex';
import { runInTransaction } from '../db/transaction';
import type { AccessStore } from '../access/store';
import type { ConversationStore } from '../conversations/store';
import type { Presence } from '../inbox/presence';
import type { MailQueue } from '../mail/queue';
import type { Unsubscribe } from '../mail/unsubscribe';
import type { QuotedMessage } from '../mail/templates';
import type { AuditLog } from '../accounts/audit';
import type { SignedActor } from '../accounts/common';
import { firstCheckAt, startedRecipients, waitingCheck, type AlertMode } from './rules';
import type { AlertMember, AlertSetting, AlertStore } from './store';

/** Messages shown in an email: the conversation's last ones. */
const LAST_MESSAGES = 5;
/** A quoted message longer than this is cut (the email links to the whole conversation). */
const QUOTE_CHARS = 300;

/**
 * Agents told of waiting visitors (docs/email.md): a visitor's first message emails the members
 * away from the inbox who chose every conversation; a scheduled check (checks.ts, on the delivery
 * engine) emails those whose wait ran out while the visitor is still unanswered. Every email is
 * queued in the transaction that decides it, beside the mark that starts its 15-minute period.
 */
export function createAgentAlerts(deps: {
  db: Knex;
  store: AlertStore;
  presence: Pick<Presence, 'online'>;
  mail: MailQueue;
  unsubscribe: Unsubscribe;
  conversations: Pick<ConversationStore, 'findById'>;
  sites: Pick<AccessStore, 'findSite'>;
  audit: AuditLog['record'];
  publicUrl: string;
  now: () => number;
}) {
  const { db, store, now } = deps;
  const base = deps.publicUrl.replace(/\/+$/, '');

  async function email(trx: Knex.Transaction, siteId: string, conversationId: string, to: AlertMember[], headline: string, at: number) {
    if (!to.length) return;
    const site = await deps.sites.findSite(siteId, trx);
    const siteName = site?.name ?? siteId;
    // Quoted as the window shows them (templates.ts renders the markdown safely), each cut at QUOTE_CHARS.
    const messages: QuotedMessage[] = (await store.lastMessages(trx, conversationId, LAST_MESSAGES)).map((m) => ({
      author: m.direction === 'incoming' ? 'Visitor' : 'Team',
      content: m.content.length > QUOTE_CHARS ? `${m.content.slice(0, QUOTE_CHARS - 1)}…` : m.content,
      format: m.format,
    }));
    const url = `${base}/dashboard/sites/${siteId}/inbox?conversation=${encodeURIComponent(conversationId)}`;
    for (const member of to) {
      const values = {
        subject: `${headline} on ${siteName}`,
        body: `${headline} on ${siteName}.`,
        messages: JSON.stringify(messages),
        url,
        actionLabel: 'Open the conversation',
        unsubscribeUrl: deps.unsubscribe.url({ kind: 'member', siteId, accountId: member.accountId }),
      };
      await deps.mail.enqueue(trx, { siteId, to: member.email, template: 'notification', values }, at);
    }
    await store.recordSent(
      trx,
      siteId,
      conversationId,
      to.map((m) => m.accountId),
      at,
    );
  }

  const service = {
    /**
     * In the transaction of a visitor's message: the emails of a new conversation, and the
     * conversation's check made due when its members' waits run out.
     */
    async onVisitorMessage(trx: Knex.Transaction, m: { siteId: string; conversationId: string; started: boolean; at: number }) {
      const members = await store.members(trx, m.siteId, m.conversationId);
      if (m.started) {
        const online = await deps.presence.online(m.siteId);
        const ids = new Set(startedRecipients(members, online, m.at));
        await email(
          trx,
          m.siteId,
          m.conversationId,
          members.filter((x) => ids.has(x.accountId)),
          'A visitor started a conversation',
          m.at,
        );
      }
      const due = firstCheckAt(members, m.at);
      if (due !== null) await store.scheduleCheck(trx, m.siteId, m.conversationId, due, m.at);
    },

    /** The scheduled check of one conversation: answers when to look again (null: nobody waits for anyone). */
    async check(siteId: string, conversationId: string): Promise<number | null> {
      return runInTransaction(db, async (trx) => {
        const at = now();
        const conversation = await deps.conversations.findById(conversationId, trx);
        if (!conversation || conversation.state !== 'open') return null;
        const waitingSince = await store.waitingSince(trx, conversationId);
        const members = await store.members(trx, siteId, conversationId);
        const online = waitingSince === null ? new Set<string>() : await deps.presence.online(siteId);
        const decided = waitingCheck({ members, online, assigneeId: conversation.assignee_id ?? null, waitingSince, now: at });
        const ids = new Set(decided.sendTo);
        const minutes = waitingSince === null ? 0 : Math.max(1, Math.round((at - waitingSince) / 60_000));
        await email(
          trx,
          siteId,
          conversationId,
          members.filter((x) => ids.has(x.accountId)),
          `A visitor has waited ${minutes} min for a reply`,
          at,
        );
        return decided.checkAgainAt;
      });
    },

    /** The signed-in member's setting on the site. */
    setting: (accountId: string, siteId: string) => store.setting(siteId, accountId),

    /** Changes the member's own setting (audited). */
    async setSetting(actor: SignedActor, siteId: string, setting: AlertSetting): Promise<AlertSetting> {
      await runInTransaction(db, async (trx) => {
        await store.saveSetting(trx, siteId, actor.manager.accountId, setting, now());
        await deps.audit(actor, [siteId], 'member.alerts_changed', actor.manager.accountId, trx);
      });
      return store.setting(siteId, actor.manager.accountId);
    },

    /** The emails' one-click unsubscribe: the member's setting on that site becomes `none`. */
    async unsubscribe(siteId: string, accountId: string): Promise<void> {
      await runInTransaction(db, async (trx) => {
        const current = await store.setting(siteId, accountId, trx);
        const mode: AlertMode = 'none';
        await store.saveSetting(trx, siteId, accountId, { ...current, mode }, now());
        await deps.audit({ manager: null, clientIp: null }, [siteId], 'member.alerts_unsubscribed', accountId, trx);
      });
    },
  };
  deps.unsubscribe.handle('member', (s) => service.unsubscribe(s.siteId, s.accountId));
  return service;
}

export type AgentAlerts = ReturnType<typeof createAgentAlerts>;
