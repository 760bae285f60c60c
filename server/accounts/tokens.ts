import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { runInTransaction } from '../db/transaction';
import type { AuditLog } from './audit';
import { eventOf, SecurityLog } from './security-log';
import { Manager, notSignedIn, SignedActor, siteIdsOf, tokenToDto } from './common';
import type { AccountStore, TokenRow } from './store';

export const MANAGEMENT_TOKEN_PREFIX = 'wcm_';

export type TokenStore = Pick<
  AccountStore,
  'db' | 'insertToken' | 'findTokenByFingerprint' | 'findToken' | 'listTokensOf' | 'revokeToken' | 'touchToken' | 'listMembershipsOf' | 'findAccount'
>;

/** Management tokens: an account's credentials for scripts, made, listed, revoked, and checked on every request. */
export function createTokens(opts: { store: TokenStore; audit: AuditLog; securityLog: SecurityLog; now: () => number }) {
  const { store, now, securityLog } = opts;
  return {
    /** A token for scripts: `wcm_` and 32 random bytes in base62, returned once; only its SHA-256 is kept. */
    async create(actor: SignedActor, label: string) {
      const token = MANAGEMENT_TOKEN_PREFIX + randomBase62(32);
      const at = now();
      const row: TokenRow = {
        id: newId('mtk', at),
        account_id: actor.manager.accountId,
        fingerprint: sha256Hex(token),
        display_prefix: token.slice(0, 12),
        label,
        created_at: at,
        last_used_at: null,
        revoked_at: null,
      };
      const sites = await siteIdsOf(store, row.account_id);
      await runInTransaction(store.db, async (trx) => {
        await store.insertToken(row, trx);
        await opts.audit.record(actor, sites, 'token.created', row.id, trx);
        await securityLog.record({ ...eventOf(actor.manager, actor), action: 'token.created', tokenId: row.id }, trx);
      });
      return { ...tokenToDto(row, at), token };
    },

    /** The account's tokens; those still in use that predate the last password change are flagged. */
    async list(manager: Manager) {
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      return (await store.listTokensOf(manager.accountId)).map((t) => tokenToDto(t, account.password_changed_at));
    },

    /** Revokes one of the caller's own tokens (another account's is 404, like a missing one); again changes nothing. */
    async revoke(actor: SignedActor, tokenId: string) {
      const row = await store.findToken(tokenId);
      if (!row || row.account_id !== actor.manager.accountId) throw new ApiError('not_found', 'Token not found.');
      const sites = await siteIdsOf(store, row.account_id);
      await runInTransaction(store.db, async (trx) => {
        if (Number(await store.revokeToken(tokenId, row.account_id, now(), trx)) === 0) return;
        await opts.audit.record(actor, sites, 'token.revoked', tokenId, trx);
        await securityLog.record({ ...eventOf(actor.manager, actor), action: 'token.revoked', tokenId }, trx);
      });
    },

    /**
     * The account behind a management token, looked up on every request so a revocation holds at
     * once; with `siteId`, its role there too (`roleOn`), read in the same statement.
     */
    async authenticate(presented: string, siteId?: string): Promise<Manager> {
      const fail = () => new ApiError('unauthorized', 'Missing, invalid or revoked management token.');
      if (!presented.startsWith(MANAGEMENT_TOKEN_PREFIX) || presented.length > 200) throw fail();
      const fingerprint = sha256Hex(presented);
      const t = await store.findTokenByFingerprint(fingerprint, siteId);
      if (!t || !safeEqual(t.fingerprint, fingerprint) || t.revoked_at !== null) throw fail();
      const at = now();
      if (t.last_used_at === null || t.last_used_at < at - 60_000) await store.touchToken(t.id, at);
      return {
        accountId: t.account_id,
        email: t.email,
        via: 'token',
        tokenId: t.id,
        ...(siteId === undefined ? {} : { roleOn: { siteId, role: t.site_role } }),
      };
    },
  };
}

export type Tokens = ReturnType<typeof createTokens>;
