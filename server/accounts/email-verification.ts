import type { Knex } from 'knex';
import { ApiError, invalid } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, sha256Hex } from '../platform/crypto';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { MailQueue } from '../mail/queue';
import type { PasswordHasher } from './passwords';
import { eventOf, type SecurityLog } from './security-log';
import { checkEmail, ClientMeta, notSignedIn, SignedActor } from './common';
import type { AccountStore } from './store';
import type { EmailLinkStore } from './email-link-store';
import type { PasswordResetStore } from './reset-store';

/** DECISIONS.md, Email: a link that proves a mailbox works 24 hours, once. */
export const EMAIL_LINK_TTL_MS = 24 * 3600_000;
/** A member asking again within this gets the link already on its way, not one more email. */
export const RESEND_GAP_MS = 60_000;

/** The dashboard page a link opens; the token is in the fragment, so it never reaches a server log or a Referer. */
export const emailLinkOf = (publicUrl: string, token: string) => `${publicUrl}/dashboard/verify-email#token=${token}`;

/**
 * The new address as the old one is told of it: enough for its holder to recognise their own
 * change (first letters and top-level domain), not enough to tell someone who took over the old
 * mailbox where the account went.
 */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  const domain = email.slice(at + 1);
  const dot = domain.lastIndexOf('.');
  return `${email.slice(0, 1)}***@${domain.slice(0, 1)}***${dot > 0 ? domain.slice(dot) : ''}`;
}

type LinkTemplate = 'email_verification' | 'email_change';

/**
 * Writes a link to `to` for the account and queues its email, in the caller's transaction (an
 * account made by an invitation or the setup link gets one in the transaction that makes it).
 */
export function createEmailLinkSender(opts: { links: Pick<EmailLinkStore, 'insert'>; mail: MailQueue; publicUrl: string; now: () => number }) {
  return async (trx: Knex.Transaction, accountId: string, to: string, template: LinkTemplate = 'email_verification') => {
    const token = randomBase62(32);
    const at = opts.now();
    await opts.links.insert(
      {
        id: newId('elk', at),
        account_id: accountId,
        email: to,
        token_hash: sha256Hex(token),
        created_at: at,
        expires_at: at + EMAIL_LINK_TTL_MS,
        used_at: null,
      },
      trx,
    );
    await opts.mail.enqueue(trx, { siteId: null, to, template, values: { url: emailLinkOf(opts.publicUrl, token) } }, at);
  };
}

export type EmailLinkSender = ReturnType<typeof createEmailLinkSender>;

const deadLink = () => new ApiError('not_found', 'This link is unknown, used or expired: ask for a new one from your profile page.');
const taken = () =>
  new ApiError('conflict', 'This address now belongs to another account: your email stays as it was. Ask for the change again with another address.');

/**
 * Verified email and changing it (docs/manage.md, "Verified email"). A link (only its hash stored,
 * 24 hours, single use) proves the mailbox it was sent to: the account's own address is then
 * verified; a new address, asked for with the current password, becomes the account's email, if it
 * is still free when the link is used. The old address is told of a change, with no link.
 */
export function createEmailVerification(opts: {
  store: Pick<AccountStore, 'db' | 'findAccount' | 'markEmailVerified' | 'setEmail'>;
  links: EmailLinkStore;
  resets: Pick<PasswordResetStore, 'endOpenOf'>;
  send: EmailLinkSender;
  hasher: PasswordHasher;
  securityLog: SecurityLog;
  mail: MailQueue;
  now: () => number;
}) {
  const { store, links, now } = opts;
  return {
    /** Sends the signed-in account a link to verify its email, unless it is verified or one left within a minute. */
    async resend(actor: SignedActor): Promise<{ emailVerified: boolean }> {
      const account = await store.findAccount(actor.manager.accountId);
      if (!account) throw notSignedIn();
      if (account.email_verified_at !== null) return { emailVerified: true };
      const latest = await links.newestOpen(account.id, account.email, now());
      if (latest !== undefined && now() - latest < RESEND_GAP_MS) return { emailVerified: false };
      await runInTransaction(store.db, (trx) => opts.send(trx, account.id, account.email));
      return { emailVerified: false };
    },

    /**
     * Asks to move the account to `rawEmail`, proved by the current password (403 when wrong): a
     * link goes to the new address, a notice to the old one, and nothing changes until the link is
     * used. The answer is the same whether or not another account has the new address (that is
     * told to whoever holds its mailbox, when the link is used).
     */
    async requestChange(actor: SignedActor, rawEmail: string, password: string, meta: ClientMeta): Promise<void> {
      const account = await store.findAccount(actor.manager.accountId);
      if (!account) throw notSignedIn();
      const email = checkEmail(rawEmail, '/body/newEmail');
      if (email === account.email)
        throw invalid('This is already the account’s email.', [{ path: '/body/newEmail', message: 'must differ from the current email' }]);
      if (!(await opts.hasher.verify(password, account.password_hash))) throw new ApiError('forbidden', 'The current password is wrong.');
      await runInTransaction(store.db, async (trx) => {
        await opts.send(trx, account.id, email, 'email_change');
        await opts.mail.enqueue(trx, { siteId: null, to: account.email, template: 'email_change_notice', values: { newEmail: maskEmail(email) } }, now());
        await opts.securityLog.record({ ...eventOf(actor.manager, meta), action: 'account.email_change_requested' }, trx);
      });
    },

    /**
     * Uses a link: once, within its 24 hours. A link to the account's own address verifies it; a
     * link to another address makes it the account's email (verified), ends the open password-reset
     * links (they went to the old address) and keeps the sessions (the change needed the password
     * and the new mailbox). 409 when the new address was taken meanwhile; the link stays unused.
     */
    async complete(token: string, meta: ClientMeta): Promise<{ email: string; changed: boolean }> {
      const row = await links.findByHash(sha256Hex(token));
      if (!row || row.used_at !== null || row.expires_at <= now()) throw deadLink();
      const event = { accountId: row.account_id, clientIp: meta.clientIp ?? null, userAgent: meta.userAgent ?? null };
      try {
        return await runInTransaction(store.db, async (trx) => {
          const at = now();
          if (!(await links.take(row, at, trx))) throw deadLink();
          const account = await store.findAccount(row.account_id, trx);
          if (!account) throw deadLink();
          if (account.email === row.email) {
            if (Number(await store.markEmailVerified(account.id, at, trx)) > 0)
              await opts.securityLog.record({ ...event, action: 'account.email_verified' }, trx);
            return { email: account.email, changed: false };
          }
          await store.setEmail(account.id, row.email, at, trx);
          await opts.resets.endOpenOf(account.id, at, trx);
          await opts.securityLog.record({ ...event, action: 'account.email_changed' }, trx);
          return { email: row.email, changed: true };
        });
      } catch (err) {
        // The accounts' unique email: another account has the address now.
        if (isUniqueViolation(err)) throw taken();
        throw err;
      }
    },

    /** Maintenance: links past their 24 hours. */
    purge: (at = now()) => links.purge(at),
  };
}

export type EmailVerification = ReturnType<typeof createEmailVerification>;
