import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { runInTransaction } from '../db/transaction';
import { normaliseEmail, PasswordHasher } from './passwords';
import { cookieMaxAgeSeconds, sessionExpiry, sessionState, shouldTouch, sudoUntil } from './session-rules';
import type { AuditLog } from './audit';
import { eventOf, SecurityLog } from './security-log';
import {
  accountToDto,
  checkPassword,
  ClientMeta,
  sudoRefusal,
  Manager,
  notSignedIn,
  SignedActor,
  sessionToDto,
  siteIdsOf,
  siteToDto,
  wrongCredentials,
} from './common';
import type { AccountRow, AccountStore, SessionRow } from './store';

export type SignInStore = Pick<
  AccountStore,
  | 'db'
  | 'findAccount'
  | 'findAccountByEmail'
  | 'setPassword'
  | 'listMembershipsOf'
  | 'insertSession'
  | 'findSessionByHash'
  | 'listSessionsOf'
  | 'touchSession'
  | 'deleteSession'
  | 'deleteSessionsOf'
  | 'purgeSessions'
  | 'markReauthenticated'
  | 'revokeTokensOf'
>;

/**
 * Sign-in and the sessions it opens: email and password to a session, the session behind a
 * cookie (idle and absolute limits), the account's own sessions, sign-out and the password change.
 */
export function createSignIn(opts: { store: SignInStore; hasher: PasswordHasher; audit: AuditLog; securityLog: SecurityLog; now: () => number }) {
  const { store, hasher, now, securityLog } = opts;
  const metaOf = (meta: ClientMeta) => ({ clientIp: meta.clientIp ?? null, userAgent: meta.userAgent ?? null });

  /** A new session of the account; its token is returned once, only its SHA-256 is kept. */
  async function startSession(account: AccountRow, meta: ClientMeta) {
    const token = randomBase62(32);
    const at = now();
    const times = sessionExpiry({ createdAt: at, lastSeenAt: at });
    const row: SessionRow = {
      id: newId('ses', at),
      token_hash: sha256Hex(token),
      account_id: account.id,
      created_at: at,
      last_seen_at: at,
      idle_expires_at: times.idleExpiresAt,
      expires_at: times.expiresAt,
      user_agent: meta.userAgent ? meta.userAgent.slice(0, 512) : null,
      client_ip: meta.clientIp ? meta.clientIp.slice(0, 64) : null,
      reauthenticated_at: null,
    };
    await runInTransaction(store.db, async (trx) => {
      await store.insertSession(row, trx);
      await securityLog.record({ accountId: account.id, action: 'session.signed_in', sessionId: row.id, ...metaOf(meta) }, trx);
    });
    return {
      token,
      session: sessionToDto(row, row.id),
      account: accountToDto(account),
      cookieMaxAge: cookieMaxAgeSeconds({ createdAt: at, lastSeenAt: at }, at),
    };
  }

  return {
    /** The password hasher, visible so a test can see that an unknown email costs a hash too. */
    hasher,
    startSession,

    /**
     * Email and password to a new session. An unknown email costs one password hash like a wrong
     * password and gets the same answer, so neither the answer nor its timing tells which emails
     * have accounts.
     */
    async signIn(rawEmail: string, password: string, meta: ClientMeta) {
      const account = await store.findAccountByEmail(normaliseEmail(rawEmail));
      if (!account) {
        await hasher.verifyNothing(password);
        throw wrongCredentials();
      }
      if (!(await hasher.verify(password, account.password_hash))) {
        // Changes nothing, so one insert. An unknown email writes nothing: the answer is the same,
        // and one indexed insert is far inside the hash's own variance (a few tries per budget).
        await securityLog.record({ accountId: account.id, action: 'session.sign_in_failed', ...metaOf(meta) });
        throw wrongCredentials();
      }
      return startSession(account, meta);
    },

    /**
     * The account behind a session cookie's token, when the session is still within both limits;
     * with `siteId`, its role there too (`roleOn`), read in the same statement.
     */
    async authenticate(token: string, siteId?: string): Promise<Manager> {
      if (token.length < 20 || token.length > 100) throw notSignedIn();
      const hash = sha256Hex(token);
      const s = await store.findSessionByHash(hash, siteId);
      if (!s || !safeEqual(s.token_hash, hash)) throw notSignedIn();
      const at = now();
      const times = { createdAt: s.created_at, lastSeenAt: s.last_seen_at };
      if (sessionState(times, at) !== 'active') throw new ApiError('unauthorized', 'The session has expired; sign in again.');
      if (shouldTouch(times, at)) await store.touchSession(s.id, at, sessionExpiry({ createdAt: s.created_at, lastSeenAt: at }).idleExpiresAt);
      return {
        accountId: s.account_id,
        email: s.email,
        via: 'session',
        sessionId: s.id,
        cookieMaxAge: cookieMaxAgeSeconds(times, at),
        sudoUntil: sudoUntil({ createdAt: s.created_at, reauthenticatedAt: s.reauthenticated_at }),
        ...(siteId === undefined ? {} : { roleOn: { siteId, role: s.site_role } }),
      };
    },

    async signOut(manager: Manager, meta: ClientMeta = {}) {
      const sessionId = manager.sessionId;
      if (!sessionId) return;
      await runInTransaction(store.db, async (trx) => {
        if (Number(await store.deleteSession(sessionId, manager.accountId, trx)) > 0)
          await securityLog.record({ ...eventOf(manager, metaOf(meta)), action: 'session.signed_out' }, trx);
      });
    },

    /**
     * The session proves the password again: its sudo window opens for SUDO_WINDOW_MS. Granted and
     * refused alike are in the account's security log. A token has no password to prove (403).
     */
    async reauthenticate(manager: Manager, password: string, meta: ClientMeta) {
      const sessionId = manager.sessionId;
      if (!sessionId) throw new ApiError('forbidden', 'A management token cannot confirm a password: sign in instead.');
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      const event = eventOf(manager, metaOf(meta));
      if (!(await hasher.verify(password, account.password_hash))) {
        await securityLog.record({ ...event, action: 'sudo.refused' });
        throw new ApiError('forbidden', 'The password is wrong.');
      }
      const at = now();
      await runInTransaction(store.db, async (trx) => {
        await store.markReauthenticated(sessionId, account.id, at, trx);
        await securityLog.record({ ...event, action: 'sudo.granted' }, trx);
      });
      return { sudoUntil: new Date(sudoUntil({ createdAt: at, reauthenticatedAt: at })).toISOString() };
    },

    async me(manager: Manager) {
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      const memberships = await store.listMembershipsOf(manager.accountId);
      return { account: accountToDto(account), via: manager.via, sites: memberships.map(siteToDto) };
    },

    async listSessions(manager: Manager) {
      const at = now();
      const rows = await store.listSessionsOf(manager.accountId);
      return rows
        .filter((s) => sessionState({ createdAt: s.created_at, lastSeenAt: s.last_seen_at }, at) === 'active')
        .map((s) => sessionToDto(s, manager.sessionId));
    },

    /** Ends one of the caller's own sessions (another account's is 404, like a missing one). */
    async endSession(manager: Manager, sessionId: string, meta: ClientMeta = {}) {
      await runInTransaction(store.db, async (trx) => {
        if (Number(await store.deleteSession(sessionId, manager.accountId, trx)) === 0) throw new ApiError('not_found', 'Session not found.');
        await securityLog.record({ ...eventOf(manager, metaOf(meta)), action: 'session.ended', sessionId }, trx);
      });
    },

    /**
     * A new password after the current one is proved. Every session of the account ends but the
     * one making the change: whoever held an old session loses it. With `revokeTokens`, every
     * management token of the account is revoked in the same transaction.
     */
    async changePassword(actor: SignedActor, current: string, next: string, revokeTokens = false) {
      const manager = actor.manager;
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      checkPassword(next, '/body/newPassword');
      if (!(await hasher.verify(current, account.password_hash))) throw new ApiError('forbidden', 'The current password is wrong.');
      const hash = await hasher.hash(next);
      const sites = await siteIdsOf(store, account.id);
      const event = eventOf(manager, actor);
      await runInTransaction(store.db, async (trx) => {
        const at = now();
        await store.setPassword(account.id, hash, at, trx);
        await securityLog.record({ ...event, action: 'account.password_changed' }, trx);
        if (Number(await store.deleteSessionsOf(account.id, manager.sessionId, trx)) > 0)
          await securityLog.record({ ...event, action: 'sessions.ended.password_change' }, trx);
        await opts.audit.record(actor, sites, 'account.password_changed', account.id, trx);
        for (const tokenId of revokeTokens ? await store.revokeTokensOf(account.id, at, trx) : []) {
          await securityLog.record({ ...event, action: 'token.revoked', tokenId }, trx);
          await opts.audit.record(actor, sites, 'token.revoked', tokenId, trx);
        }
      });
    },

    /** Why the caller may not do what needs a recent password proof now, or null (common.ts's `sudoRefusal` on this clock). */
    sudoRefusal: (manager: Manager, tokens: boolean) => sudoRefusal(manager, now(), tokens),

    /** Maintenance: sessions past either limit can never be used again. */
    purge: async (at = now()) => Number(await store.purgeSessions(at)),
  };
}

export type SignIn = ReturnType<typeof createSignIn>;
