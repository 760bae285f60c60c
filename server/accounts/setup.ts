import type { Knex } from 'knex';
import { ApiError } from '../platform/errors';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { toIsoRequired } from '../platform/time';
import { runInTransaction } from '../db/transaction';
import type { AuditLog } from './audit';
import type { AccountRegistry } from './registry';
import type { SignIn } from './sign-in';
import { Actor, checkEmail, ClientMeta, siteToDto } from './common';
import { SETUP_LINK_ID } from './store';
import type { AccountStore } from './store';

/** Where the first-start setup link opens (the dashboard's page), the token in the fragment, which browsers never send to a server. */
export const SETUP_PATH = '/dashboard/setup';
/** How long a setup link is valid; a start with still no account replaces it sooner. */
export const SETUP_LINK_TTL_MS = 24 * 3600_000;

export type SetupStore = Pick<
  AccountStore,
  'db' | 'hasAccounts' | 'allSiteIds' | 'replaceSetupLink' | 'findSetupLink' | 'takeSetupLink' | 'insertMembership' | 'listMembershipsOf'
>;

/** The first owner: the one-time setup link a start with no account prints, and its use. */
export function createSetup(opts: {
  store: SetupStore;
  registry: AccountRegistry;
  signIn: Pick<SignIn, 'startSession'>;
  audit: AuditLog;
  publicUrl: string;
  now: () => number;
  /** Emails the new account the link that verifies its address, in the transaction that makes it. */
  sendVerification?: (trx: Knex.Transaction, accountId: string, email: string) => Promise<unknown>;
}) {
  const { store, now } = opts;
  return {
    /**
     * On a start with no account yet: a new one-time setup link, valid SETUP_LINK_TTL_MS, that makes
     * the first owner. It replaces any earlier link (one row under a fixed id: with several
     * instances starting at once, the link written last is the valid one). Null once an account
     * exists. The token (32 random bytes, base62) is returned once; only its SHA-256 is stored.
     */
    async issueLink(): Promise<{ url: string; expiresAt: string } | null> {
      const token = randomBase62(32);
      const at = now();
      const issued = await runInTransaction(store.db, async (trx) => {
        if (await store.hasAccounts(trx)) return false;
        await store.replaceSetupLink({ id: SETUP_LINK_ID, token_hash: sha256Hex(token), created_at: at, expires_at: at + SETUP_LINK_TTL_MS }, trx);
        return true;
      });
      if (!issued) return null;
      return { url: `${opts.publicUrl}${SETUP_PATH}#token=${token}`, expiresAt: toIsoRequired(at + SETUP_LINK_TTL_MS) };
    },

    /**
     * Uses the setup link: a new account, owner of every site that exists, and its first session.
     * Taking the link, checking that no account exists, the account and its memberships are one
     * transaction, so two uses at once make one owner (the other finds the link gone) and an account
     * made meanwhile by the CLI or an invitation (which ends the link) leaves it dead. An unknown,
     * used, replaced or expired link is one answer, 404.
     */
    async complete(token: string, rawEmail: string, password: string, meta: ClientMeta) {
      const gone = () => new ApiError('not_found', 'This setup link does not exist, was used, was replaced by a newer one or has expired.');
      const hash = sha256Hex(token);
      const link = await store.findSetupLink();
      if (!link || !safeEqual(link.token_hash, hash) || link.expires_at <= now()) throw gone();
      const email = checkEmail(rawEmail);
      // The slow hash, outside the transaction. The link went to the operator, not to this address: it gets its own.
      const row = await opts.registry.newRow(email, password, false);
      const actor: Actor = { manager: { accountId: row.id, email, via: 'session' }, clientIp: meta.clientIp ?? null };
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.takeSetupLink(hash, now(), trx))) throw gone();
        if (await store.hasAccounts(trx)) throw gone();
        await opts.registry.insert(row, trx);
        await opts.sendVerification?.(trx, row.id, row.email);
        for (const siteId of await store.allSiteIds(trx)) {
          await store.insertMembership({ account_id: row.id, site_id: siteId, role: 'owner', created_at: now() }, trx);
          await opts.audit.record(actor, [siteId], 'member.added.owner', row.id, trx);
        }
      });
      const session = await opts.signIn.startSession(row, meta);
      return { account: session.account, sites: (await store.listMembershipsOf(row.id)).map(siteToDto), session };
    },
  };
}

export type Setup = ReturnType<typeof createSetup>;
