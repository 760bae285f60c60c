import type { Knex } from 'knex';
import { runInTransaction } from '../db/transaction';
import { CursorCodec, toPage } from '../platform/cursor';
import { toIsoRequired } from '../platform/time';
import { notFound } from '../platform/errors';
import type { AuditActor } from '../accounts/audit';
import type { AccountStore } from '../accounts/store';
import type { AccessStore } from '../access/store';
import type { EmailRow, MailStore } from './store';
import type { MailQueue } from './queue';

/** DECISIONS.md, Email: the mail log keeps 30 days. */
export const MAIL_LOG_RETENTION_MS = 30 * 24 * 3600_000;

/** What the log calls the delivery states: an email is handed to a relay, not delivered to a person. */
const STATUS = { pending: 'queued', delivered: 'sent', failed: 'failed' } as const;

/** An entry of the mail log: no body, no values, no link. */
export function emailToDto(r: EmailRow) {
  return {
    id: r.id,
    recipient: r.recipient,
    template: r.template,
    status: STATUS[r.status],
    attempts: r.attempts,
    lastError: r.last_error,
    createdAt: toIsoRequired(r.created_at),
    updatedAt: toIsoRequired(r.updated_at),
  };
}

/**
 * A site's mail log (owners, /manage/v1) and its test email: queued like any other, in the
 * transaction of its audit entry, so the log shows it queued and then sent or failed.
 */
export function createMailLog(opts: {
  db: Knex;
  store: Pick<MailStore, 'listForSite'>;
  queue: MailQueue;
  sites: Pick<AccessStore, 'findSite'>;
  accounts: Pick<AccountStore, 'findAccount'>;
  audit: (actor: AuditActor, siteIds: string[], action: string, objectId: string | null, trx: Knex) => Promise<unknown>;
  cursors: CursorCodec;
  /** Where emails go (`smtp://relay:port`, or the directory of .eml files): the settings page says it. */
  destination: string;
  now: () => number;
}) {
  return {
    destination: opts.destination,
    async page(siteId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { log: 'mail', siteId };
      const before = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await opts.store.listForSite(siteId, { limit: limit + 1, before });
      return toPage(rows, limit, (page) => page.map(emailToDto), opts.cursors, scope);
    },
    /** Queues the test email to the owner asking for it (an account's own address only, so it cannot be aimed at strangers). */
    async sendTest(actor: AuditActor & { manager: { accountId: string } }, siteId: string) {
      const site = await opts.sites.findSite(siteId);
      const account = await opts.accounts.findAccount(actor.manager.accountId);
      if (!site || !account) throw notFound('Site');
      const at = opts.now();
      const id = await runInTransaction(opts.db, async (trx) => {
        const emailId = await opts.queue.enqueue(
          trx,
          { siteId, to: account.email, template: 'test', values: { siteName: site.name, requestedBy: account.email } },
          at,
        );
        await opts.audit(actor, [siteId], 'mail.test_queued', emailId, trx);
        return emailId;
      });
      return { id, recipient: account.email, status: 'queued' as const, destination: opts.destination };
    },
  };
}

export type MailLog = ReturnType<typeof createMailLog>;
