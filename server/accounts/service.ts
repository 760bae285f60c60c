import type { Knex } from 'knex';
import { ApiError, invalid } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { toIso, toIsoRequired } from '../platform/time';
import { CursorCodec, toPage } from '../platform/cursor';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { AccessStore } from '../access/store';
import { createPasswordHasher, normaliseEmail, PasswordHasher, passwordProblem } from './passwords';
import { cookieMaxAgeSeconds, sessionExpiry, sessionState, shouldTouch } from './session-rules';
import { AuditActor, createAuditLog } from './audit';
import { SETUP_LINK_ID } from './store';
import type { AccountRow, AccountStore, InvitationRow, MemberRow, Role, SessionRow, SiteMembershipRow, TokenRow } from './store';

export const MANAGEMENT_TOKEN_PREFIX = 'wcm_';
export const INVITATION_TTL_MS = 7 * 24 * 3600_000;
export const AUDIT_RETENTION_MS = 365 * 24 * 3600_000;
/** Where an invitation link opens (the dashboard's page); the token is in the fragment, which browsers never send to a server. */
export const INVITATION_PATH = '/dashboard/accept-invitation';
/** Where the first-start setup link opens (the dashboard's page), the token in the fragment likewise. */
export const SETUP_PATH = '/dashboard/setup';
/** How long a setup link is valid; a start with still no account replaces it sooner. */
export const SETUP_LINK_TTL_MS = 24 * 3600_000;

/** Who is calling the management API: an account, by a session cookie or a management token. */
export interface Manager {
  accountId: string;
  email: string;
  via: 'session' | 'token';
  sessionId?: string;
  tokenId?: string;
  /** Seconds the session cookie may still live (sessions only). */
  cookieMaxAge?: number;
}

/** Who did something, for the audit log; `manager` null is the operator CLI. */
export interface Actor extends AuditActor {
  manager: Manager | null;
}

export const CLI_ACTOR: Actor = { manager: null, clientIp: null };

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}\.[^\s@]{1,63}$/;

const wrongCredentials = () => new ApiError('unauthorized', 'The email or password is wrong.');
const notSignedIn = () => new ApiError('unauthorized', 'Sign in (session cookie) or send Authorization: Bearer wcm_...');
const noSuchSite = () => new ApiError('not_found', 'Site not found.');

export function accountToDto(a: AccountRow) {
  return { id: a.id, email: a.email, createdAt: toIsoRequired(a.created_at), passwordChangedAt: toIsoRequired(a.password_changed_at) };
}

function sessionToDto(s: SessionRow, currentId?: string) {
  const { idleExpiresAt, expiresAt } = sessionExpiry({ createdAt: s.created_at, lastSeenAt: s.last_seen_at });
  return {
    id: s.id,
    createdAt: toIsoRequired(s.created_at),
    lastSeenAt: toIsoRequired(s.last_seen_at),
    idleExpiresAt: toIsoRequired(idleExpiresAt),
    expiresAt: toIsoRequired(expiresAt),
    userAgent: s.user_agent,
    clientAddress: s.client_ip,
    current: s.id === currentId,
  };
}

function pendingInvitationToDto(i: InvitationRow) {
  return {
    id: i.id,
    siteId: i.site_id,
    email: i.email,
    role: i.role,
    createdBy: i.created_by,
    createdAt: toIsoRequired(i.created_at),
    expiresAt: toIsoRequired(i.expires_at),
  };
}

function tokenToDto(t: TokenRow) {
  return {
    id: t.id,
    label: t.label,
    prefix: t.display_prefix,
    createdAt: toIsoRequired(t.created_at),
    lastUsedAt: toIso(t.last_used_at),
    revokedAt: toIso(t.revoked_at),
  };
}

const memberToDto = (m: MemberRow) => ({ accountId: m.account_id, email: m.email, role: m.role, joinedAt: toIsoRequired(m.created_at) });
const siteToDto = (m: SiteMembershipRow) => ({ id: m.site_id, name: m.site_name, role: m.role, joinedAt: toIsoRequired(m.created_at) });

export interface AccountsOptions {
  store: AccountStore;
  sites: AccessStore;
  cursors: CursorCodec;
  publicUrl: string;
  now: () => number;
  hasher?: PasswordHasher;
}

/**
 * Accounts, their roles on sites, sign-in sessions, management tokens, invitations and the audit
 * log: every rule of who may do what in the management API. The routes, the CLI and maintenance
 * call these functions and nothing else.
 */
export function createAccountsService(opts: AccountsOptions) {
  const { store, now } = opts;
  const hasher = opts.hasher ?? createPasswordHasher();

  function checkEmail(raw: string): string {
    const email = normaliseEmail(raw);
    if (email.length > 254 || !EMAIL.test(email))
      throw invalid('The email address is not valid.', [{ path: '/body/email', message: 'must be an email address' }]);
    return email;
  }
  function checkPassword(password: string, path = '/body/password') {
    const problem = passwordProblem(password);
    if (problem) throw invalid(`The password ${problem}.`, [{ path, message: problem }]);
  }

  const auditLog = createAuditLog({ store, cursors: opts.cursors, now });
  const audit = auditLog.record;

  /**
   * The caller's membership of the site, or 404 when it has none (a site one is not a member of
   * does not exist for one), or 403 `forbidden` when the role is not enough.
   */
  async function requireRole(manager: Manager, siteId: string, needed: 'owner' | 'member') {
    const m = await store.findMembership(manager.accountId, siteId);
    if (!m) throw noSuchSite();
    if (needed === 'owner' && m.role !== 'owner') throw new ApiError('forbidden', 'Only an owner of the site may do this.');
    return m;
  }

  async function startSession(account: AccountRow, meta: { userAgent?: string; clientIp?: string | null }) {
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

  /** A new account's row, its password checked and hashed (slow: outside any transaction). */
  async function newAccountRow(email: string, password: string): Promise<AccountRow> {
    checkPassword(password);
    const at = now();
    return { id: newId('usr', at), email, password_hash: await hasher.hash(password), created_at: at, password_changed_at: at };
  }
  /**
   * Inserts an account and, in the same transaction, ends the setup link: once any account exists
   * the link must not make a first owner. The link's use takes the same row (a conditional delete),
   * so of a setup and another account made at once, the setup either committed first or finds its
   * link gone.
   */
  async function insertAccount(row: AccountRow, trx?: Knex.Transaction) {
    const write = async (t: Knex.Transaction) => {
      try {
        await store.insertAccount(row, t);
      } catch (err) {
        if (isUniqueViolation(err)) throw invalid('An account with this email already exists.', [{ path: '/body/email', message: 'is taken' }]);
        throw err;
      }
      await store.dropSetupLink(t);
    };
    if (trx) await write(trx);
    else await runInTransaction(store.db, write);
    return row;
  }

  /** Sets a member's role or adds the account to the site; a changed role ends the account's sessions. */
  async function setMembership(actor: Actor, siteId: string, accountId: string, role: Role, how: 'add' | 'change') {
    return runInTransaction(store.db, async (trx) => {
      const current = await store.findMembership(accountId, siteId, trx);
      if (how === 'change' && !current) throw new ApiError('not_found', 'Member not found.');
      if (current?.role === role) return { changed: false };
      if (current?.role === 'owner' && (await store.countOwners(siteId, trx)) <= 1) {
        throw new ApiError('forbidden', 'A site keeps at least one owner: make another member owner first.');
      }
      if (current) {
        await store.setRole(accountId, siteId, role, trx);
        await store.deleteSessionsOf(accountId, undefined, trx);
        await audit(actor, [siteId], `member.role_changed.${role}`, accountId, trx);
      } else {
        await store.insertMembership({ account_id: accountId, site_id: siteId, role, created_at: now() }, trx);
        await audit(actor, [siteId], `member.added.${role}`, accountId, trx);
      }
      return { changed: true };
    });
  }

  const service = {
    /** The password hasher, visible so a test can see that an unknown email costs a hash too. */
    hasher,
    /**
     * For the management API's other features (keys, the event address, the inbox): the caller's
     * membership of a site or 404, and 403 `forbidden` when `owner` is needed and it is an agent.
     */
    requireRole,
    /** For the same features: an entry in the sites' audit log, in the change's transaction when given. */
    audit,
    /** A site made through the management API: its creator becomes its first owner, in the site's transaction. */
    async addFirstOwner(actor: Actor & { manager: Manager }, siteId: string, trx: Knex) {
      await store.insertMembership({ account_id: actor.manager.accountId, site_id: siteId, role: 'owner', created_at: now() }, trx);
    },
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

    // ---- Accounts (the CLI makes the first ones) ----

    async createAccount(rawEmail: string, password: string) {
      return accountToDto(await insertAccount(await newAccountRow(checkEmail(rawEmail), password)));
    },
    /** Every account with its sites (the CLI's `account list`). */
    async listAccounts() {
      const accounts = await store.listAccounts();
      return Promise.all(accounts.map(async (a) => ({ ...accountToDto(a), sites: (await store.listMembershipsOf(a.id)).map(siteToDto) })));
    },
    /** The CLI's `member add`: an existing account joins the site with `role`, or its role changes. */
    async addMember(actor: Actor, siteId: string, rawEmail: string, role: Role) {
      if (!(await opts.sites.findSite(siteId))) throw noSuchSite();
      const account = await store.findAccountByEmail(normaliseEmail(rawEmail));
      if (!account) throw new ApiError('not_found', 'No account has this email; create it first (account create).');
      await setMembership(actor, siteId, account.id, role, 'add');
      return { siteId, accountId: account.id, email: account.email, role };
    },

    // ---- The first owner: the setup link ----

    /**
     * On a start with no account yet: a new one-time setup link, valid SETUP_LINK_TTL_MS, that makes
     * the first owner. It replaces any earlier link (one row under a fixed id: with several
     * instances starting at once, the link written last is the valid one). Null once an account
     * exists. The token (32 random bytes, base62) is returned once; only its SHA-256 is stored.
     */
    async issueSetupLink(): Promise<{ url: string; expiresAt: string } | null> {
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
    async completeSetup(token: string, rawEmail: string, password: string, meta: { userAgent?: string; clientIp?: string | null }) {
      const gone = () => new ApiError('not_found', 'This setup link does not exist, was used, was replaced by a newer one or has expired.');
      const hash = sha256Hex(token);
      const link = await store.findSetupLink();
      if (!link || !safeEqual(link.token_hash, hash) || link.expires_at <= now()) throw gone();
      const email = checkEmail(rawEmail);
      const row = await newAccountRow(email, password); // the slow hash, outside the transaction
      const actor: Actor = { manager: { accountId: row.id, email, via: 'session' }, clientIp: meta.clientIp ?? null };
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.takeSetupLink(hash, now(), trx))) throw gone();
        if (await store.hasAccounts(trx)) throw gone();
        await insertAccount(row, trx);
        const sites = await store.allSiteIds(trx);
        for (const siteId of sites) {
          await store.insertMembership({ account_id: row.id, site_id: siteId, role: 'owner', created_at: now() }, trx);
          await audit(actor, [siteId], 'member.added.owner', row.id, trx);
        }
      });
      const session = await startSession(row, meta);
      return { account: session.account, sites: (await store.listMembershipsOf(row.id)).map(siteToDto), session };
    },

    // ---- Sign-in and sessions ----

    /**
     * Email and password to a new session. An unknown email costs one password hash like a wrong
     * password and gets the same answer, so neither the answer nor its timing tells which emails
     * have accounts. The session's token is returned once: only its SHA-256 is kept.
     */
    async signIn(rawEmail: string, password: string, meta: { userAgent?: string; clientIp?: string | null }) {
      const account = await store.findAccountByEmail(normaliseEmail(rawEmail));
      if (!account) {
        await hasher.verifyNothing(password);
        throw wrongCredentials();
      }
      if (!(await hasher.verify(password, account.password_hash))) throw wrongCredentials();
      return startSession(account, meta);
    },

    /** The account behind a session cookie's token, when the session is still within both limits. */
    async authenticateSession(token: string): Promise<Manager> {
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

    /** The account behind a management token, looked up on every request so a revocation holds at once. */
    async authenticateToken(presented: string): Promise<Manager> {
      const fail = () => new ApiError('unauthorized', 'Missing, invalid or revoked management token.');
      if (!presented.startsWith(MANAGEMENT_TOKEN_PREFIX) || presented.length > 200) throw fail();
      const fingerprint = sha256Hex(presented);
      const t = await store.findTokenByFingerprint(fingerprint);
      if (!t || !safeEqual(t.fingerprint, fingerprint) || t.revoked_at !== null) throw fail();
      const at = now();
      if (t.last_used_at === null || t.last_used_at < at - 60_000) await store.touchToken(t.id, at);
      return { accountId: t.account_id, email: t.email, via: 'token', tokenId: t.id };
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
    async changePassword(actor: Actor & { manager: Manager }, current: string, next: string) {
      const manager = actor.manager;
      const account = await store.findAccount(manager.accountId);
      if (!account) throw notSignedIn();
      checkPassword(next, '/body/newPassword');
      if (!(await hasher.verify(current, account.password_hash))) throw new ApiError('forbidden', 'The current password is wrong.');
      const hash = await hasher.hash(next);
      const sites = (await store.listMembershipsOf(account.id)).map((m) => m.site_id);
      await runInTransaction(store.db, async (trx) => {
        await store.setPassword(account.id, hash, now(), trx);
        await store.deleteSessionsOf(account.id, manager.sessionId, trx);
        await audit(actor, sites, 'account.password_changed', account.id, trx);
      });
    },

    // ---- Management tokens ----

    /** A token for scripts: `wcm_` and 32 random bytes in base62, returned once; only its SHA-256 is kept. */
    async createToken(actor: Actor & { manager: Manager }, label: string) {
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
      const sites = (await store.listMembershipsOf(row.account_id)).map((m) => m.site_id);
      await runInTransaction(store.db, async (trx) => {
        await store.insertToken(row, trx);
        await audit(actor, sites, 'token.created', row.id, trx);
      });
      return { ...tokenToDto(row), token };
    },
    async listTokens(manager: Manager) {
      return (await store.listTokensOf(manager.accountId)).map(tokenToDto);
    },
    async revokeToken(actor: Actor & { manager: Manager }, tokenId: string) {
      const row = await store.findToken(tokenId);
      if (!row || row.account_id !== actor.manager.accountId) throw new ApiError('not_found', 'Token not found.');
      if (Number(await store.revokeToken(tokenId, row.account_id, now())) > 0) {
        const sites = (await store.listMembershipsOf(row.account_id)).map((m) => m.site_id);
        await audit(actor, sites, 'token.revoked', tokenId);
      }
    },

    // ---- Sites and members ----

    async mySites(manager: Manager) {
      return (await store.listMembershipsOf(manager.accountId)).map(siteToDto);
    },
    async listMembers(manager: Manager, siteId: string) {
      await requireRole(manager, siteId, 'member');
      return (await store.listMembers(siteId)).map(memberToDto);
    },
    /** An owner changes a member's role; the member's sessions end, so the new role applies to a fresh sign-in. */
    async changeRole(actor: Actor & { manager: Manager }, siteId: string, accountId: string, role: Role) {
      await requireRole(actor.manager, siteId, 'owner');
      await setMembership(actor, siteId, accountId, role, 'change');
      const member = (await store.listMembers(siteId)).find((m) => m.account_id === accountId)!;
      return memberToDto(member);
    },
    /** An owner removes a member: the membership and every session of that account end. */
    async removeMember(actor: Actor & { manager: Manager }, siteId: string, accountId: string) {
      await requireRole(actor.manager, siteId, 'owner');
      await runInTransaction(store.db, async (trx) => {
        const m = await store.findMembership(accountId, siteId, trx);
        if (!m) throw new ApiError('not_found', 'Member not found.');
        if (m.role === 'owner' && (await store.countOwners(siteId, trx)) <= 1)
          throw new ApiError('forbidden', 'A site keeps at least one owner: make another member owner first.');
        await store.deleteMembership(accountId, siteId, trx);
        await store.deleteSessionsOf(accountId, undefined, trx);
        await audit(actor, [siteId], 'member.removed', accountId, trx);
      });
    },
    /** An owner signs a member of the site out everywhere. */
    async endMemberSessions(actor: Actor & { manager: Manager }, siteId: string, accountId: string) {
      await requireRole(actor.manager, siteId, 'owner');
      if (!(await store.findMembership(accountId, siteId))) throw new ApiError('not_found', 'Member not found.');
      const ended = Number(await store.deleteSessionsOf(accountId));
      await audit(actor, [siteId], 'member.sessions_ended', accountId);
      return { ended };
    },

    // ---- Invitations ----

    /** An owner invites an email with a role: a single-use link, valid 7 days, shown once; only its SHA-256 is kept. */
    async createInvitation(actor: Actor & { manager: Manager }, siteId: string, rawEmail: string, role: Role) {
      await requireRole(actor.manager, siteId, 'owner');
      const email = checkEmail(rawEmail);
      const token = randomBase62(32);
      const at = now();
      const row: InvitationRow = {
        id: newId('inv', at),
        token_hash: sha256Hex(token),
        site_id: siteId,
        role,
        email,
        created_by: actor.manager.accountId,
        created_at: at,
        expires_at: at + INVITATION_TTL_MS,
        accepted_at: null,
        accepted_by: null,
      };
      await runInTransaction(store.db, async (trx) => {
        await store.insertInvitation(row, trx);
        await audit(actor, [siteId], `invitation.created.${role}`, row.id, trx);
      });
      return { id: row.id, siteId, email, role, expiresAt: toIsoRequired(row.expires_at), token, url: `${opts.publicUrl}${INVITATION_PATH}#token=${token}` };
    },

    /** An owner's view of the invitations still waiting to be taken (never their tokens), newest first. */
    async listInvitations(manager: Manager, siteId: string, query: { limit?: number; cursor?: string }) {
      await requireRole(manager, siteId, 'owner');
      const limit = query.limit ?? 25;
      const scope = { list: 'invitations', siteId };
      const after = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.listPendingInvitations(siteId, now(), limit + 1, after);
      return toPage(rows, limit, (page) => page.map(pendingInvitationToDto), opts.cursors, scope);
    },
    /** An owner withdraws an invitation nobody has taken: its link stops working at once. */
    async revokeInvitation(actor: Actor & { manager: Manager }, siteId: string, invitationId: string) {
      await requireRole(actor.manager, siteId, 'owner');
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.deletePendingInvitation(siteId, invitationId, now(), trx))) {
          throw new ApiError('not_found', 'No pending invitation with this id: it was taken, has expired or never existed.');
        }
        await audit(actor, [siteId], 'invitation.revoked', invitationId, trx);
      });
    },

    /**
     * Takes an invitation once. The signed-in caller joins as itself; otherwise `email` and
     * `password` name the account that joins: a new one is made, or an existing one signs in with
     * its password. Either way the account's email must be the invited one. An unknown, used or
     * expired token is one answer, 404.
     */
    async acceptInvitation(
      token: string,
      who: { manager: Manager } | { email: string; password: string },
      meta: { userAgent?: string; clientIp?: string | null },
    ) {
      const gone = () => new ApiError('not_found', 'This invitation does not exist, was used or has expired.');
      const hash = sha256Hex(token);
      const inv = await store.findInvitationByHash(hash);
      if (!inv || !safeEqual(inv.token_hash, hash) || inv.accepted_at !== null || inv.expires_at <= now()) throw gone();
      let account: AccountRow | undefined;
      /** A new account, written in the transaction that takes the invitation: both or neither. */
      let created: AccountRow | undefined;
      let signedIn = false;
      if ('manager' in who) {
        account = await store.findAccount(who.manager.accountId);
      } else {
        const email = checkEmail(who.email);
        if (email !== inv.email)
          throw invalid('This invitation is for another email address.', [{ path: '/body/email', message: 'must be the invited email' }]);
        account = await store.findAccountByEmail(email);
        if (account) {
          if (!(await hasher.verify(who.password, account.password_hash))) throw wrongCredentials();
        } else {
          account = created = await newAccountRow(email, who.password);
        }
        signedIn = true;
      }
      if (!account) throw notSignedIn();
      if (account.email !== inv.email)
        throw invalid('This invitation is for another email address.', [{ path: '/body/email', message: 'must be the invited email' }]);
      const joined = account;
      const actor: Actor = { manager: { accountId: joined.id, email: joined.email, via: 'session' }, clientIp: meta.clientIp ?? null };
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.consumeInvitation(inv.id, joined.id, now(), trx))) throw gone();
        if (created) await insertAccount(created, trx);
        const existing = await store.findMembership(joined.id, inv.site_id, trx);
        if (existing) {
          if (existing.role !== inv.role && inv.role === 'owner') {
            await store.setRole(joined.id, inv.site_id, inv.role, trx);
          }
        } else {
          await store.insertMembership({ account_id: joined.id, site_id: inv.site_id, role: inv.role, created_at: now() }, trx);
        }
        await audit(actor, [inv.site_id], `invitation.accepted.${inv.role}`, inv.id, trx);
      });
      const membership = (await store.listMembershipsOf(joined.id)).find((m) => m.site_id === inv.site_id)!;
      const session = signedIn ? await startSession(joined, meta) : undefined;
      return { account: accountToDto(joined), site: siteToDto(membership), session };
    },

    // ---- Audit log ----

    async auditLog(manager: Manager, siteId: string, query: { limit?: number; cursor?: string }) {
      await requireRole(manager, siteId, 'owner');
      return auditLog.page(siteId, query);
    },

    /** Maintenance: sessions past their limits, invitations nobody can take, audit entries over a year old. */
    async purge(at = now()) {
      const sessions = Number(await store.purgeSessions(at));
      const invitations = Number(await store.purgeInvitations(at - INVITATION_TTL_MS));
      const audit = Number(await store.purgeAudit(at - AUDIT_RETENTION_MS));
      return { sessions, invitations, audit };
    },
  };
  return service;
}

export type AccountsService = ReturnType<typeof createAccountsService>;
