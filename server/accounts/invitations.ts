import { ApiError, invalid } from '../platform/errors';
import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { toIsoRequired } from '../platform/time';
import { CursorCodec, toPage } from '../platform/cursor';
import { runInTransaction } from '../db/transaction';
import type { PasswordHasher } from './passwords';
import type { AuditLog } from './audit';
import type { AccountRegistry } from './registry';
import type { SignIn } from './sign-in';
import { accountToDto, Actor, checkEmail, ClientMeta, Manager, notSignedIn, pendingInvitationToDto, SignedActor, siteToDto, wrongCredentials } from './common';
import type { AccountRow, AccountStore, InvitationRow, Role } from './store';

export const INVITATION_TTL_MS = 7 * 24 * 3600_000;
/** Where an invitation link opens (the dashboard's page); the token is in the fragment, which browsers never send to a server. */
export const INVITATION_PATH = '/dashboard/accept-invitation';

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
  cursors: CursorCodec;
  publicUrl: string;
  now: () => number;
}) {
  const { store, now, audit } = opts;
  const otherEmail = () => invalid('This invitation is for another email address.', [{ path: '/body/email', message: 'must be the invited email' }]);

  return {
    /** An owner invites an email with a role: a single-use link, valid 7 days, shown once; only its SHA-256 is kept. */
    async create(actor: SignedActor, siteId: string, rawEmail: string, role: Role) {
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
        await audit.record(actor, [siteId], `invitation.created.${role}`, row.id, trx);
      });
      return { id: row.id, siteId, email, role, expiresAt: toIsoRequired(row.expires_at), token, url: `${opts.publicUrl}${INVITATION_PATH}#token=${token}` };
    },

    /** An owner's view of the invitations still waiting to be taken (never their tokens), newest first. */
    async list(siteId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { list: 'invitations', siteId };
      const after = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.listPendingInvitations(siteId, now(), limit + 1, after);
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
     * `password` name the account that joins: a new one is made, or an existing one signs in with
     * its password. Either way the account's email must be the invited one. An unknown, used or
     * expired token is one answer, 404.
     */
    async accept(token: string, who: Invitee, meta: ClientMeta) {
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
        if (email !== inv.email) throw otherEmail();
        account = await store.findAccountByEmail(email);
        if (account) {
          if (!(await opts.hasher.verify(who.password, account.password_hash))) throw wrongCredentials();
        } else {
          account = created = await opts.registry.newRow(email, who.password);
        }
        signedIn = true;
      }
      if (!account) throw notSignedIn();
      if (account.email !== inv.email) throw otherEmail();
      const joined = account;
      const actor: Actor = { manager: { accountId: joined.id, email: joined.email, via: 'session' }, clientIp: meta.clientIp ?? null };
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.consumeInvitation(inv.id, joined.id, now(), trx))) throw gone();
        if (created) await opts.registry.insert(created, trx);
        const existing = await store.findMembership(joined.id, inv.site_id, trx);
        if (existing) {
          if (existing.role !== inv.role && inv.role === 'owner') {
            await store.setRole(joined.id, inv.site_id, inv.role, trx);
          }
        } else {
          await store.insertMembership({ account_id: joined.id, site_id: inv.site_id, role: inv.role, created_at: now() }, trx);
        }
        await audit.record(actor, [inv.site_id], `invitation.accepted.${inv.role}`, inv.id, trx);
      });
      const membership = (await store.listMembershipsOf(joined.id)).find((m) => m.site_id === inv.site_id)!;
      const session = signedIn ? await opts.signIn.startSession(joined, meta) : undefined;
      return { account: accountToDto(joined), site: siteToDto(membership), session };
    },

    /** Maintenance: invitations that expired (or were used) over a week ago, which nobody can take. */
    purge: async (at = now()) => Number(await store.purgeInvitations(at - INVITATION_TTL_MS)),
  };
}

export type Invitations = ReturnType<typeof createInvitations>;
