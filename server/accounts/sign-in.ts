import { ApiError } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { runInTransaction } from '../db/transaction';
import { normaliseEmail, PasswordHasher } from './passwords';
import { cookieMaxAgeSeconds, sessionExpiry, sessionState, shouldTouch } from './session-rules';
import type { AuditLog } from './audit';
import { accountToDto, checkPassword, ClientMeta, Manager, notSignedIn, SignedActor, sessionToDto, siteIdsOf, siteToDto, wrongCredentials } from './common';
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
>;

/**
 * Sign-in and the sessions it opens: email and password to a session, the session behind a
 * cookie (idle and absolute limits), the account's own sessions, sign-out and the password change.
 */
export function createSignIn(opts: { store: SignInStore; hasher: PasswordHasher; audit: AuditLog; now: () => number }) {
  const { store, hasher, now } = opts;

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
    };
    await store.insertSession(row);
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
      if (!(await hasher.verify(password, account.password_hash))) throw wrongCredentials();
      return startSession(account, meta);
    },

    /** The account behind a session cookie's token, when the session is still within both limits. */
    async authenticate(token: string): Promise<Manager> {
      if (token.length < 20 || token.length > 100) throw notSignedIn();
      const hash = sha256Hex(token);
      const s = await store.findSessionByHash(hash);
      if (!s || !safeEqual(s.token_hash, hash)) throw notSignedIn();
      const at = now();
      const times = { createdAt: s.created_at, lastSeenAt: s.last_seen_at };
      if (sessionState(times, at) !== 'active') throw new ApiError('unauthorized', 'The session has expired; sign in again.');
      if (shouldTouch(times, at)) await store.touchSession(s.id, at, sessionExpiry({ createdAt: s.created_at, lastSeenAt: at }).idleExpiresAt);
      return { accountId: s.account_id, email: s.email, via: 'session', sessionId: s.id, cookieMaxAge: cookieMaxAgeSeconds(times, at) };
    },

    async signOut(manager: Manager) {
      if (manager.sessionId) await store.deleteSession(manager.sessionId, manager.accountId);
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
    async endSession(manager: Manager, sessionId: string) {
      if (Number(await store.deleteSession(sessionId, manager.accountId)) === 0) throw new ApiError('not_found', 'Session not found.');
    },

    /**
     * A new password after the current one is proved. Every session of the account ends but the
     * one making the change (a token-made change keeps none): whoever held an old session loses it.
     */
    async changePassword(actor: SignedActor, current: string, next: string) {
      const manager = actor.manager;
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      checkPassword(next, '/body/newPassword');
      if (!(await hasher.verify(current, account.password_hash))) throw new ApiError('forbidden', 'The current password is wrong.');
      const hash = await hasher.hash(next);
      const sites = await siteIdsOf(store, account.id);
      await runInTransaction(store.db, async (trx) => {
        await store.setPassword(account.id, hash, now(), trx);
        await store.deleteSessionsOf(account.id, manager.sessionId, trx);
        await opts.audit.record(actor, sites, 'account.password_changed', account.id, trx);
      });
    },

    /** Maintenance: sessions past either limit can never be used again. */
    purge: async (at = now()) => Number(await store.purgeSessions(at)),
  };
}

export type SignIn = ReturnType<typeof createSignIn>;
