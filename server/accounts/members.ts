import type { Knex } from 'knex';
import { ApiError } from '../platform/errors';
import { runInTransaction } from '../db/transaction';
import type { AccessStore } from '../access/store';
import { normaliseEmail } from './passwords';
import { sessionState } from './session-rules';
import type { AuditLog } from './audit';
import type { SecurityAction, SecurityLog } from './security-log';
import { Actor, lastOwner, sudoRefusal, throwIf, Manager, memberToDto, noSuchMember, noSuchSite, onlyOwners, SignedActor, siteToDto } from './common';
import type { AccountStore, Role } from './store';

export type MemberStore = Pick<
  AccountStore,
  | 'db'
  | 'findVerifiedAccountByEmail'
  | 'insertMembership'
  | 'findMembership'
  | 'listMembershipsOf'
  | 'listMembers'
  | 'setRole'
  | 'deleteMembership'
  | 'deleteSessionsOf'
  | 'findSessionOf'
  | 'findToken'
  | 'lockOwners'
  | 'findMember'
>;

/** What a role on a site allows: none is 404 (another site is not shown), an agent where an owner is needed 403. */
export function checkRole(role: Role | null, needed: 'owner' | 'member'): Role {
  if (!role) throw noSuchSite();
  if (needed === 'owner' && role !== 'owner') throw onlyOwners();
  return role;
}

/**
 * Who belongs to which site with which role: the caller's membership (the role check), the
 * members list, role changes and removals with the rule that a site keeps an owner, and the
 * operator's `member add`.
 */
export function createMembers(opts: {
  store: MemberStore;
  sites: Pick<AccessStore, 'findSite'>;
  audit: AuditLog;
  securityLog: SecurityLog;
  now: () => number;
}) {
  const { store, now, audit } = opts;
  /** Ends every session of the account, and says so in its security log (no address: another person did it). */
  const endAllSessions = async (accountId: string, action: SecurityAction, trx?: Knex) => {
    const ended = Number(await store.deleteSessionsOf(accountId, undefined, trx));
    if (ended > 0) await opts.securityLog.record({ accountId, action }, trx);
    return ended;
  };

  /**
   * Runs `work`, a change that may drop an owner, in a transaction that first locks the site's owner
   * rows (store.lockOwners), then checks with them what the entry checked before the lock: that the
   * acting account is still an owner (another owner may have demoted or removed it meanwhile). The
   * operator CLI (`manager` null) needs no role. Read committed on MySQL, so every read after the
   * lock sees what the owners' last change committed.
   */
  function asOwner<T>(actor: Actor, siteId: string, work: (trx: Knex.Transaction, owners: string[]) => Promise<T>) {
    return runInTransaction(
      store.db,
      async (trx) => {
        const owners = await store.lockOwners(siteId, trx);
        if (actor.manager && !owners.includes(actor.manager.accountId)) throw onlyOwners();
        return work(trx, owners);
      },
      { isolation: 'read committed' },
    );
  }

  /**
   * Sets a member's role or adds the account to the site; a changed role ends the account's
   * sessions. The member as it is then, read in the same transaction.
   */
  async function setMembership(actor: Actor, siteId: string, accountId: string, role: Role, how: 'add' | 'change') {
    return asOwner(actor, siteId, async (trx, owners) => {
      const current = await store.findMembership(accountId, siteId, trx);
      if (how === 'change' && !current) throw noSuchMember();
      if (current?.role === role) return store.findMember(siteId, accountId, trx);
      if (current?.role === 'owner' && owners.length <= 1) throw lastOwner();
      if (current) {
        await store.setRole(accountId, siteId, role, trx);
        await endAllSessions(accountId, 'sessions.ended.role_change', trx);
        await audit.record(actor, [siteId], `member.role_changed.${role}`, accountId, trx);
      } else {
        await store.insertMembership({ account_id: accountId, site_id: siteId, role, created_at: now() }, trx);
        await audit.record(actor, [siteId], `member.added.${role}`, accountId, trx);
      }
      return store.findMember(siteId, accountId, trx);
    });
  }

  /**
   * The caller's membership of the site, or 404 when it has none (a site one is not a member of
   * does not exist for one), or 403 `forbidden` when the role is not enough.
   */
  async function requireRole(manager: Manager, siteId: string, needed: 'owner' | 'member') {
    const m = await store.findMembership(manager.accountId, siteId);
    checkRole(m?.role ?? null, needed);
    return m!;
  }

  return {
    requireRole,
    /** Whether the account is a member of the site (its membership, or undefined). */
    find: (accountId: string, siteId: string) => store.findMembership(accountId, siteId),

    /**
     * For a live stream, asked again while it runs (without counting as the session's activity):
     * why the caller may no longer act on the site (membership, session or token ended), or null.
     */
    async refusalOf(manager: Manager, siteId: string): Promise<string | null> {
      if (!(await store.findMembership(manager.accountId, siteId))) return 'no longer a member of the site';
      if (manager.sessionId) {
        const s = await store.findSessionOf(manager.accountId, manager.sessionId);
        if (!s || sessionState({ createdAt: s.created_at, lastSeenAt: s.last_seen_at }, now()) !== 'active') return 'the session ended';
      } else if (manager.tokenId) {
        const t = await store.findToken(manager.tokenId);
        if (!t || t.revoked_at !== null) return 'the token was revoked';
      }
      return null;
    },

    /** A site made through the management API: its creator becomes its first owner, in the site's transaction. */
    async addFirstOwner(actor: SignedActor, siteId: string, trx: Knex) {
      await store.insertMembership({ account_id: actor.manager.accountId, site_id: siteId, role: 'owner', created_at: now() }, trx);
    },

    /** The CLI's `member add`: an existing account joins the site with `role`, or its role changes. */
    async add(actor: Actor, siteId: string, rawEmail: string, role: Role) {
      if (!(await opts.sites.findSite(siteId))) throw noSuchSite();
      // Only an account that proved its mailbox is found by email: one answer for none and an unverified one.
      const account = await store.findVerifiedAccountByEmail(normaliseEmail(rawEmail));
      if (!account)
        throw new ApiError('not_found', 'No account has verified this email: create it (account create), or its holder follows the verification link first.');
      await setMembership(actor, siteId, account.id, role, 'add');
      return { siteId, accountId: account.id, email: account.email, role, emailVerified: true };
    },

    async mySites(manager: Manager) {
      return (await store.listMembershipsOf(manager.accountId)).map(siteToDto);
    },

    async list(siteId: string) {
      return (await store.listMembers(siteId)).map(memberToDto);
    },

    /** An owner changes a member's role; the member's sessions end, so the new role applies to a fresh sign-in. */
    async changeRole(actor: SignedActor, siteId: string, accountId: string, role: Role) {
      // Making an owner is lasting access to the site: it needs a recent password proof (x-sudo: owner-role).
      if (role === 'owner') throwIf(sudoRefusal(actor.manager, now(), true));
      // Read in the change's transaction: a removal right after it must not leave nothing to answer.
      const member = await setMembership(actor, siteId, accountId, role, 'change');
      if (!member) throw noSuchMember();
      return memberToDto(member);
    },

    /** An owner removes a member: the membership and every session of that account end. */
    async remove(actor: SignedActor, siteId: string, accountId: string) {
      await asOwner(actor, siteId, async (trx, owners) => {
        const m = await store.findMembership(accountId, siteId, trx);
        if (!m) throw noSuchMember();
        if (m.role === 'owner' && owners.length <= 1) throw lastOwner();
        await store.deleteMembership(accountId, siteId, trx);
        await endAllSessions(accountId, 'sessions.ended.removal', trx);
        await audit.record(actor, [siteId], 'member.removed', accountId, trx);
      });
    },

    /** An owner signs a member of the site out everywhere. */
    async endSessions(actor: SignedActor, siteId: string, accountId: string) {
      return runInTransaction(store.db, async (trx) => {
        if (!(await store.findMembership(accountId, siteId, trx))) throw noSuchMember();
        const ended = await endAllSessions(accountId, 'sessions.ended.owner', trx);
        await audit.record(actor, [siteId], 'member.sessions_ended', accountId, trx);
        return { ended };
      });
    },
  };
}

export type Members = ReturnType<typeof createMembers>;
