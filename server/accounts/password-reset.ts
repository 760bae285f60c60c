import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, sha256Hex } from '../platform/crypto';
import { runInTransaction } from '../db/transaction';
import type { MailQueue } from '../mail/queue';
import type { PasswordHasher } from './passwords';
import { normaliseEmail } from './passwords';
import type { SecurityLog } from './security-log';
import { checkPassword, ClientMeta } from './common';
import type { AccountStore } from './store';
import type { PasswordResetStore } from './reset-store';

/** DECISIONS.md, Email: a password reset link works one hour, once. */
export const RESET_LINK_TTL_MS = 3600_000;

/** The dashboard page a link opens; the token is in the fragment, so it never reaches a server log or a Referer. */
export const resetLinkOf = (publicUrl: string, token: string) => `${publicUrl}/dashboard/reset-password#token=${token}`;

const deadLink = () => new ApiError('not_found', 'This link is unknown, used or expired: ask for a new one from the sign-in page.');

/**
 * Forgot password. Asking answers the same whether or not the email has an account; when it has,
 * a single-use link (only its hash stored) is emailed in the transaction that writes it. Using the
 * link sets the new password, ends every session of the account, verifies its email (the link
 * proved the mailbox) and is written to the account's security log.
 */
export function createPasswordReset(opts: {
  store: Pick<AccountStore, 'db' | 'findAccount' | 'findAccountByEmail' | 'setPassword' | 'deleteSessionsOf' | 'markEmailVerified'>;
  resets: PasswordResetStore;
  hasher: PasswordHasher;
  securityLog: SecurityLog;
  mail: MailQueue;
  publicUrl: string;
  now: () => number;
}) {
  const { store, resets, now } = opts;
  return {
    /** Sends a link when the email has an account; answers nothing either way. */
    async request(rawEmail: string): Promise<void> {
      const account = await store.findAccountByEmail(normaliseEmail(rawEmail));
      if (!account) return;
      const token = randomBase62(32);
      const at = now();
      await runInTransaction(store.db, async (trx) => {
        await resets.insert(
          { id: newId('pwr', at), account_id: account.id, token_hash: sha256Hex(token), created_at: at, expires_at: at + RESET_LINK_TTL_MS, used_at: null },
          trx,
        );
        await opts.mail.enqueue(trx, { siteId: null, to: account.email, template: 'password_reset', values: { url: resetLinkOf(opts.publicUrl, token) } }, at);
      });
    },

    /** Sets the new password through a link: once, within its hour. Answers the account's email (to sign in with). */
    async complete(token: string, password: string, meta: ClientMeta): Promise<{ email: string }> {
      checkPassword(password, '/body/newPassword');
      const row = await resets.findByHash(sha256Hex(token));
      if (!row || row.used_at !== null || row.expires_at <= now()) throw deadLink();
      const hash = await opts.hasher.hash(password);
      const email = await runInTransaction(store.db, async (trx) => {
        const at = now();
        if (!(await resets.take(row, at, trx))) throw deadLink();
        const account = await store.findAccount(row.account_id, trx);
        if (!account) throw deadLink();
        await store.setPassword(row.account_id, hash, at, trx);
        await store.markEmailVerified(row.account_id, at, trx);
        const event = { accountId: row.account_id, clientIp: meta.clientIp ?? null, userAgent: meta.userAgent ?? null };
        await opts.securityLog.record({ ...event, action: 'account.password_reset' }, trx);
        if (Number(await store.deleteSessionsOf(row.account_id, undefined, trx)) > 0)
          await opts.securityLog.record({ ...event, action: 'sessions.ended.password_reset' }, trx);
        return account.email;
      });
      return { email };
    },

    /** Maintenance: links past their hour. */
    purge: (at = now()) => resets.purge(at),
  };
}

export type PasswordReset = ReturnType<typeof createPasswordReset>;
