import type { Knex } from 'knex';
import { ApiError, invalid } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { toIsoRequired } from '../platform/time';
import { CursorCodec, toPage } from '../platform/cursor';
import { runInTransaction } from '../db/transaction';
import type { PasswordHasher } from './passwords';
import type { AuditLog } from './audit';
import type { SecurityLog } from './security-log';
import type { AccountRegistry } from './registry';
import type { SignIn } from './sign-in';
import {
  accountToDto,
  Actor,
  checkEmail,
  checkPassword,
  ClientMeta,
  Manager,
  notSignedIn,
  pendingInvitationToDto,
  SignedActor,
  siteToDto,
  sudoRefusal,
  throwIf,
  wrongCredentials,
} from './common';
import type { AccountRow, AccountStore, InvitationRow, Role } from './store';
import type { RateLimiter } from '../http/rate-limit/limiter';

export const INVITATION_TTL_MS = 7 * 24 * 3600_000;

/** What the invitation email says: the site, the role, who invited, and the link (the owner still sees it once too). */
export interface InvitationEmail {
  siteId: string;
  email: string;
  role: Role;
  url: string;
  /** The inviting account's id. */
  invitedBy: string;
}
/** Where an invitation link opens (the dashboard's page); the token is in the fragment, which browsers never send to a server. */
export const INVITATION_PATH = '/dashboard/accept-invitation';

/**
 * Any account may make a site and invite any email, so an invitation is also a way to try
 * passwords against an email. Each one answers at most `attemptsPerInvitation` password checks
 * (then it is dead, 404 like a used one); each account, and each site, makes at most
 * `perAccountPerDay` and `perSitePerDay` of them (GitHub's figure for an organisation's
 * invitations a day): guessing needs ever more invitations, and each one is in the audit log.
 */
export const INVITATION_LIMITS = { attemptsPerInvitation: 5, perAccountPerDay: 50, perSitePerDay: 50 };
const DAY_MS = 24 * 3600_000;

/**
 * Counts one invitation against the site's budget and the inviting account's, on the shared
 * limiter (Redis with REDIS_URL), so every instance counts the same invitations; 429 with
 * Retry-After past either. Called once the caller is known to be an owner, so nobody spends
 * another site's budget.
 */
export async function spendInvitationBudget(limiter: RateLimiter, siteId: string, accountId: string): Promise<void> {
  const { perSitePerDay, perAccountPerDay } = INVITATION_LIMITS;
  const refuse = (what: string, limit: number, seconds: number) =>
    new ApiError('rate_limit_exceeded', `At most ${limit} invitations a day per ${what}; retry in ${Math.max(1, seconds)} s.`, undefined, {
      'Retry-After': String(Math.max(1, seconds)),
    });
  const site = await limiter.spend(`manage:invitations:site:${siteId}`, 1, perSitePerDay, DAY_MS);
  if (!site.allowed) throw refuse('site', perSitePerDay, site.retryAfterSeconds);
  const account = await limiter.spend(`manage:invitations:account:${accountId}`, 1, perAccountPerDay, DAY_MS);
  if (!account.allowed) {
    await site.refund(1);
    throw refuse('account', perAccountPerDay, account.retryAfterSeconds);
  }
}

export type InvitationStore = Pick<
  AccountStore,
  | 'db'
  | 'findAccount'
  | 'findAccountByEmail'
  | 'findMembership'
  | 'insertMembership'
  | 'setRole'
  | 'listMembershipsOf'
  | 'insertInvitation'
  | 'findInvitationByHash'
  | 'consumeInvitation'
  | 'listPendingInvitations'
  | 'deletePendingInvitation'
  | 'purgeInvitations'
  | 'takeInvitationAttempt'
  | 'giveBackInvitationAttempt'
  | 'deleteSessionsOf'
>;

/** Who takes an invitation: the signed-in caller, or an email and password (a new account or an existing one's). */
export type Invitee = { manager: Manager } | { email: string; password: string };

/** An owner's invitations to a site: single-use links, valid a week, and their acceptance. */
export function createInvitations(opts: {
  store: InvitationStore;
  registry: AccountRegistry;
  signIn: Pick<SignIn, 'startSession'>;
  hasher: PasswordHasher;
  audit: AuditLog;
  securityLog: SecurityLog;
  cursors: CursorCodec;
  publicUrl: string;
  now: () => number;
  /** Emails the invitation to the invited address, in the transaction that creates it (services.ts: the mail queue). */
  sendInvitation?: (trx: Knex.Transaction, invitation: InvitationEmail) => Promise<unknown>;
  /** Emails a new account the link that verifies its address, in the transaction that makes it (email-verification.ts). */
  sendVerification?: (trx: Knex.Transaction, accountId: string, email: string) => Promise<unknown>;
}) {
  const { store, now, audit } = opts;
  const otherEmail = () => invalid('This invitation is for another email address.', [{ path: '/body/email', message: 'must be the invited email' }]);
  const gone = () => new ApiError('not_found', 'This invitation does not exist, was used or has expired.');
  const MAX_ATTEMPTS = INVITATION_LIMITS.attemptsPerInvitation;
  const unverified = () =>
    new ApiError('forbidden', 'Verify your email first (the link emailed to you, or resend it from your profile page): then accept the invitation.');

  /**
   * The account an invitation's `email` and `password` name, without a session: a new one (made
   * unverified: holding the link proves no mailbox) or an existing verified one whose password this is. The
   * answer and its cost do not tell which: the password's rules are checked before the email is
   * looked up (every stored password satisfies them), then either path spends exactly one hash, and
   * a wrong password is sign-in's 401. Each check takes one of the invitation's attempts first, in
   * its own transaction, so attempts sent at once cannot pass the bound; the one that spends the last
   * and fails writes `invitation.exhausted`.
   */
  async function proveInvitee(inv: InvitationRow, who: { email: string; password: string }, meta: ClientMeta) {
    const email = checkEmail(who.email);
    if (email !== inv.email) throw otherEmail();
    checkPassword(who.password);
    const attempt = await runInTransaction(store.db, (trx) => store.takeInvitationAttempt(inv.id, MAX_ATTEMPTS, now(), trx));
    if (attempt === null) throw gone();
    let account: AccountRow | undefined;
    try {
      account = await store.findAccountByEmail(email);
      if (!account) return { account: await opts.registry.newRow(email, who.password, false), created: true };
      // An unverified account cannot be found by its email: even its own password does not attach it.
      if ((await opts.hasher.verify(who.password, account.password_hash)) && account.email_verified_at !== null) return { account, created: false };
    } catch (err) {
      // The password was never checked (a full hashing queue, a failed read): no guess was made.
      await store.giveBackInvitationAttempt(inv.id).catch(() => undefined);
      throw err;
    }
    if (attempt >= MAX_ATTEMPTS) {
      // The service's own change (actor `operator`), with the address that spent the last attempt.
      await audit.record({ manager: null, clientIp: meta.clientIp ?? null }, [inv.site_id], 'invitation.exhausted', inv.id);
    }
    // Sign-in's answer to a wrong password, for an unverified account too: nothing tells them apart.
    throw wrongCredentials();
  }

  return {
    /**
     * An owner invites an email with a role: a single-use link, valid 7 days, shown once; only its
     * SHA-256 is kept. `admit` spends the day's budget (spendInvitationBudget) once the email is valid.
     * The answer is the same whether the email has an account: any account may invite any email.
     */
    async create(actor: SignedActor, siteId: string, rawEmail: string, role: Role, admit: () => Promise<void> = async () => {}) {
      // An owner invitation makes an owner: it needs a recent password proof (x-sudo: owner-role).
      if (role === 'owner') throwIf(sudoRefusal(actor.manager, now(), true));
      const email = checkEmail(rawEmail);
      await admit();
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
        attempts: 0,
      };
      const url = `${opts.publicUrl}${INVITATION_PATH}#token=${token}`;
      await runInTransaction(store.db, async (trx) => {
        await store.insertInvitation(row, trx);
        await audit.record(actor, [siteId], `invitation.created.${role}`, row.id, trx);
        await opts.sendInvitation?.(trx, { siteId, email, role, url, invitedBy: actor.manager.accountId });
      });
      return { id: row.id, siteId, email, role, expiresAt: toIsoRequired(row.expires_at), token, url };
    },

    /** An owner's view of the invitations still waiting to be taken (never their tokens), newest first. */
    async list(siteId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { list: 'invitations', siteId };
      const after = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.listPendingInvitations(siteId, now(), INVITATION_LIMITS.attemptsPerInvitation, limit + 1, after);
      return toPage(rows, limit, (page) => page.map(pendingInvitationToDto), opts.cursors, scope);
    },

    /** An owner withdraws an invitation nobody has taken: its link stops working at once. */
    async revoke(actor: SignedActor, siteId: string, invitationId: string) {
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.deletePendingInvitation(siteId, invitationId, now(), trx))) {
          throw new ApiError('not_found', 'No pending invitation with this id: it was taken, has expired or never existed.');
        }
        await audit.record(actor, [siteId], 'invitation.revoked', invitationId, trx);
      });
    },

    /**
     * Takes an invitation once. The signed-in caller joins as itself; otherwise `email` and
     * `password` name the account that joins (see proveInvitee). Either way the account's email must
     * be the invited one. An unknown, used, expired or dead (no attempts left) token is one answer,
     * 404. An existing member invited as owner is promoted, which is a role change like any: audited
     * as one and ending the account's sessions (the accepting browser gets a fresh one).
     */
    async accept(token: string, who: Invitee, meta: ClientMeta) {
      const hash = sha256Hex(token);
      const inv = await store.findInvitationByHash(hash);
      if (!inv || !safeEqual(inv.token_hash, hash) || inv.accepted_at !== null || inv.expires_at <= now() || inv.attempts >= MAX_ATTEMPTS) throw gone();
      const proved = 'manager' in who ? { account: await store.findAccount(who.manager.accountId), created: false } : await proveInvitee(inv, who, meta);
      if (!proved.account) throw notSignedIn();
      const joined = proved.account;
      if (joined.email !== inv.email) throw otherEmail();
      if (!proved.created && joined.email_verified_at === null) throw unverified();
      const manager: Manager = 'manager' in who ? who.manager : { accountId: joined.id, email: joined.email, via: 'session' };
      const actor: Actor = { manager, clientIp: meta.clientIp ?? null };
      const promoted = await runInTransaction(store.db, async (trx) => {
        if (!(await store.consumeInvitation(inv.id, joined.id, now(), trx))) throw gone();
        if (proved.created) {
          await opts.registry.insert(joined, trx);
          // The invitation's link proves no mailbox (its owner holds it too): the address gets its own.
          await opts.sendVerification?.(trx, joined.id, joined.email);
        }
        const existing = await store.findMembership(joined.id, inv.site_id, trx);
        let promotion = false;
        if (!existing) {
          await store.insertMembership({ account_id: joined.id, site_id: inv.site_id, role: inv.role, created_at: now() }, trx);
        } else if (existing.role !== inv.role && inv.role === 'owner') {
          await store.setRole(joined.id, inv.site_id, inv.role, trx);
          // A promotion is a role change: its sessions end, and its security log says so.
          if (Number(await store.deleteSessionsOf(joined.id, undefined, trx)) > 0)
            await opts.securityLog.record({ accountId: joined.id, action: 'sessions.ended.role_change' }, trx);
          await audit.record(actor, [inv.site_id], `member.role_changed.${inv.role}`, joined.id, trx);
          promotion = true;
        }
        await audit.record(actor, [inv.site_id], `invitation.accepted.${inv.role}`, inv.id, trx);
        return promotion;
      });
      const membership = (await store.listMembershipsOf(joined.id)).find((m) => m.site_id === inv.site_id);
      if (!membership) throw gone(); // removed again in the instant since
      // A password makes a session; a promoted browser's session ended with its old role, so it gets a new one.
      const freshSession = !('manager' in who) || (promoted && manager.via === 'session');
      const session = freshSession ? await opts.signIn.startSession(joined, meta) : undefined;
      return { account: accountToDto(joined), site: siteToDto(membership), session };
    },

    /** Maintenance: invitations that expired (or were used) over a week ago, which nobody can take. */
    purge: async (at = now()) => Number(await store.purgeInvitations(at - INVITATION_TTL_MS)),
  };
}

export type Invitations = ReturnType<typeof createInvitations>;
