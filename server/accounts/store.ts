import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { precompiled } from '../db/precompiled';

export type Role = 'owner' | 'agent';
export const ROLES: Role[] = ['owner', 'agent'];

export interface AccountRow {
  id: string;
  email: string;
  password_hash: string;
  created_at: number;
  password_changed_at: number;
  /** When control of the mailbox was established; null for an account made through an invitation (migration 016). */
  email_verified_at: number | null;
  /** What the account is called on rows, notes and the window (migration 018); null: the email's local part. */
  display_name: string | null;
}

export interface MembershipRow {
  account_id: string;
  site_id: string;
  role: Role;
  created_at: number;
}

export interface SessionRow {
  id: string;
  token_hash: string;
  account_id: string;
  created_at: number;
  last_seen_at: number;
  idle_expires_at: number;
  expires_at: number;
  user_agent: string | null;
  client_ip: string | null;
  /** When the session last proved the password again (migration 017); null: only at sign-in. */
  reauthenticated_at: number | null;
}

export interface TokenRow {
  id: string;
  account_id: string;
  fingerprint: string;
  display_prefix: string;
  label: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

/**
 * A credential's row as a request's check reads it: the account's email and, in the same statement,
 * the account's role on the site the request names (null: not a member, or no site named).
 */
export type CredentialWithRole<R> = R & { email: string; site_role: Role | null };

export interface InvitationRow {
  id: string;
  token_hash: string;
  site_id: string;
  role: Role;
  email: string;
  created_by: string;
  created_at: number;
  expires_at: number;
  accepted_at: number | null;
  accepted_by: string | null;
  /** Acceptances tried with a password (migration 016); at the limit the invitation is dead. */
  attempts: number;
}

export interface AuditRow {
  id: string;
  site_id: string;
  created_at: number;
  actor_account_id: string | null;
  actor_token_id: string | null;
  action: string;
  object_id: string | null;
  client_ip: string | null;
}

/** The one setup link (migration 012): the SHA-256 of its token and its lifetime. */
export interface SetupLinkRow {
  id: typeof SETUP_LINK_ID;
  token_hash: string;
  created_at: number;
  expires_at: number;
}

export const SETUP_LINK_ID = 'first-owner';

/** An entry of an account's security log (migration 017). */
export interface SecurityLogRow {
  id: string;
  account_id: string;
  created_at: number;
  action: string;
  client_ip: string | null;
  user_agent: string | null;
  session_id: string | null;
  token_id: string | null;
}

const SECURITY_LOG_COLUMNS = ['id', 'account_id', 'created_at', 'action', 'client_ip', 'user_agent', 'session_id', 'token_id'] as const;
const mapSecurityEntry = (r: SecurityLogRow) => withNumericColumns(r, ['created_at']);

/** A member of a site as the members list shows it: the membership with the account's email. */
export interface MemberRow extends MembershipRow {
  email: string;
  email_verified_at: number | null;
  display_name: string | null;
}

/** A site the account belongs to, with its name. */
export interface SiteMembershipRow extends MembershipRow {
  site_name: string;
}

const ACCOUNT_COLUMNS = ['id', 'email', 'password_hash', 'created_at', 'password_changed_at', 'email_verified_at', 'display_name'] as const;
const SESSION_COLUMNS = [
  'id',
  'token_hash',
  'account_id',
  'created_at',
  'last_seen_at',
  'idle_expires_at',
  'expires_at',
  'user_agent',
  'client_ip',
  'reauthenticated_at',
] as const;
const TOKEN_COLUMNS = ['id', 'account_id', 'fingerprint', 'display_prefix', 'label', 'created_at', 'last_used_at', 'revoked_at'] as const;
const INVITATION_COLUMNS = [
  'id',
  'token_hash',
  'site_id',
  'role',
  'email',
  'created_by',
  'created_at',
  'expires_at',
  'accepted_at',
  'accepted_by',
  'attempts',
] as const;
const AUDIT_COLUMNS = ['id', 'site_id', 'created_at', 'actor_account_id', 'actor_token_id', 'action', 'object_id', 'client_ip'] as const;

/** The one row mapping of each table (mysql2 may hand BIGINT back as a string). */
const mapAccount = (r: AccountRow) => withNumericColumns(r, ['created_at', 'password_changed_at', 'email_verified_at']);
const mapMembership = <R extends MembershipRow>(r: R) => withNumericColumns(r, ['created_at']);
const mapSession = <R extends SessionRow>(r: R) => withNumericColumns(r, ['created_at', 'last_seen_at', 'idle_expires_at', 'expires_at', 'reauthenticated_at']);
const mapToken = <R extends TokenRow>(r: R) => withNumericColumns(r, ['created_at', 'last_used_at', 'revoked_at']);
const mapInvitation = (r: InvitationRow) => withNumericColumns(r, ['created_at', 'expires_at', 'accepted_at', 'attempts']);
const mapMember = (r: MemberRow) => withNumericColumns(r, ['created_at', 'email_verified_at']);
const MEMBER_COLUMNS = ['m.account_id', 'm.site_id', 'm.role', 'm.created_at', 'a.email', 'a.email_verified_at', 'a.display_name'];
const mapAudit = (r: AuditRow) => withNumericColumns(r, ['created_at']);

/** A keyset page newest first by (created_at, id): the rows strictly before `after`, when given. */
function newestFirst(q: Knex.QueryBuilder, limit: number, after?: { createdAt: number; id: string }): Knex.QueryBuilder {
  if (after)
    q.andWhere((w) => w.where('created_at', '<', after.createdAt).orWhere((x) => x.where('created_at', after.createdAt).andWhere('id', '<', after.id)));
  return q
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(limit);
}

export function createAccountStore(db: Knex) {
  const first = async <R>(q: Knex.QueryBuilder, map: (r: R) => R) => {
    const row = (await q) as R | undefined;
    return row ? map(row) : undefined;
  };
  /**
   * A credential by its hash with the account's role on `siteId` left-joined (compiled once): every
   * request of the management API reads its credential, and one naming a site needs the membership
   * too, so both come in one round trip.
   */
  const credential = <R>(table: string, hashColumn: string, columns: readonly string[]) =>
    precompiled<CredentialWithRole<R>>(db, 2, (v) =>
      db(`${table} as c`)
        .join('accounts as a', 'a.id', 'c.account_id')
        .leftJoin('memberships as m', (j) => j.on('m.account_id', 'c.account_id').andOnVal('m.site_id', '=', v[1]))
        .where(`c.${hashColumn}`, v[0])
        .first([...columns.map((c) => `c.${c}`), 'a.email', 'm.role as site_role']),
    );
  const sessionWithRole = credential<SessionRow>('sessions', 'token_hash', SESSION_COLUMNS);
  const tokenWithRole = credential<TokenRow>('management_tokens', 'fingerprint', TOKEN_COLUMNS);
  /** A write's count of rows, or nothing for an insert: plain promises, so an in-memory store can have the same type. */
  const count = async (q: Knex.QueryBuilder): Promise<number> => Number(await q);
  const done = async (q: Knex.QueryBuilder): Promise<void> => {
    await q;
  };
  return {
    db,
    insertAccount: (row: AccountRow, trx: Knex = db) => done(trx('accounts').insert(row)),
    /** Whether any account exists (reads in the caller's transaction when given). */
    hasAccounts: async (trx: Knex = db) => !!(await trx('accounts').first('id')),
    /** Every site's id: the first owner, made by the setup link, owns them all. */
    allSiteIds: async (trx: Knex = db): Promise<string[]> => (await trx('sites').orderBy('created_at').select('id')).map((r: { id: string }) => r.id),

    /** Writes the setup link, replacing any earlier one (one row under a fixed id). */
    replaceSetupLink: (row: SetupLinkRow, trx: Knex = db) =>
      done(trx('setup_links').insert(row).onConflict('id').merge(['token_hash', 'created_at', 'expires_at'])),
    findSetupLink: async (trx: Knex = db) => {
      const row = (await trx('setup_links').where({ id: SETUP_LINK_ID }).first('id', 'token_hash', 'created_at', 'expires_at')) as SetupLinkRow | undefined;
      return row && withNumericColumns(row, ['created_at', 'expires_at']);
    },
    /**
     * Takes the setup link once: removes it when it is still the one with this hash and not expired
     * (a conditional delete: of two uses at once, one removes it). True when this call took it.
     */
    takeSetupLink: async (tokenHash: string, at: number, trx: Knex = db) =>
      Number(await trx('setup_links').where({ id: SETUP_LINK_ID, token_hash: tokenHash }).andWhere('expires_at', '>', at).del()) === 1,
    /** Any account made another way ends the setup link (in that account's transaction). */
    dropSetupLink: (trx: Knex = db) => count(trx('setup_links').where({ id: SETUP_LINK_ID }).del()),
    findAccount: (id: string, trx: Knex = db) => first<AccountRow>(trx('accounts').where({ id }).first(ACCOUNT_COLUMNS), mapAccount),
    findAccountByEmail: (email: string, trx: Knex = db) => first<AccountRow>(trx('accounts').where({ email }).first(ACCOUNT_COLUMNS), mapAccount),
    /**
     * The account that proved control of this email, for everything that finds someone else's account
     * by its email (invitations, `member add --email`): an unverified one is as if it did not exist.
     */
    findVerifiedAccountByEmail: (email: string, trx: Knex = db) =>
      first<AccountRow>(trx('accounts').where({ email }).whereNotNull('email_verified_at').first(ACCOUNT_COLUMNS), mapAccount),
    /** The emails of these accounts (the ones that exist), in one read. */
    emailsOf: async (ids: string[]): Promise<Map<string, string>> => {
      if (!ids.length) return new Map();
      const rows: { id: string; email: string }[] = await db('accounts').whereIn('id', ids).select('id', 'email');
      return new Map(rows.map((r) => [r.id, r.email]));
    },
    /** The names of these accounts (the ones that exist): the display name each chose, and the email it falls back on. */
    namesOf: async (ids: readonly string[], trx: Knex = db): Promise<Map<string, { displayName: string | null; email: string }>> => {
      const unique = [...new Set(ids)];
      if (!unique.length) return new Map();
      const rows: { id: string; email: string; display_name: string | null }[] = await trx('accounts')
        .whereIn('id', unique)
        .select('id', 'email', 'display_name');
      return new Map(rows.map((r) => [r.id, { displayName: r.display_name, email: r.email }]));
    },
    /** Sets or clears (null) the account's display name. */
    setDisplayName: (id: string, name: string | null, trx: Knex = db) => count(trx('accounts').where({ id }).update({ display_name: name })),
    listAccounts: async () => ((await db('accounts').orderBy('created_at').select(ACCOUNT_COLUMNS)) as AccountRow[]).map(mapAccount),
    setPassword: (id: string, hash: string, at: number, trx: Knex = db) =>
      count(trx('accounts').where({ id }).update({ password_hash: hash, password_changed_at: at })),

    insertMembership: (row: MembershipRow, trx: Knex = db) => done(trx('memberships').insert(row)),
    findMembership: (accountId: string, siteId: string, trx: Knex = db) =>
      first<MembershipRow>(
        trx('memberships').where({ account_id: accountId, site_id: siteId }).first('account_id', 'site_id', 'role', 'created_at'),
        mapMembership,
      ),
    /** The account's sites, by when it joined them. */
    listMembershipsOf: async (accountId: string) =>
      (
        (await db('memberships as m')
          .join('sites as s', 's.id', 'm.site_id')
          .where('m.account_id', accountId)
          .orderBy([{ column: 'm.created_at' }, { column: 'm.site_id' }])
          .select('m.account_id', 'm.site_id', 'm.role', 'm.created_at', 's.name as site_name')) as SiteMembershipRow[]
      ).map(mapMembership),
    listMembers: async (siteId: string) =>
      (
        (await db('memberships as m')
          .join('accounts as a', 'a.id', 'm.account_id')
          .where('m.site_id', siteId)
          .orderBy([{ column: 'm.created_at' }, { column: 'm.account_id' }])
          .select(MEMBER_COLUMNS)) as MemberRow[]
      ).map(mapMember),
    setRole: (accountId: string, siteId: string, role: Role, trx: Knex = db) =>
      count(trx('memberships').where({ account_id: accountId, site_id: siteId }).update({ role })),
    deleteMembership: (accountId: string, siteId: string, trx: Knex = db) => count(trx('memberships').where({ account_id: accountId, site_id: siteId }).del()),

    insertSession: (row: SessionRow, trx: Knex = db) => done(trx('sessions').insert(row)),
    /** A session by its token's hash, with its account's email and role on `siteId` ('' names none): every signed-in request asks, in one read. */
    findSessionByHash: async (hash: string, siteId = ''): Promise<CredentialWithRole<SessionRow> | undefined> => {
      const [row] = await sessionWithRole([hash, siteId]);
      return row && mapSession(row);
    },
    /** One of the account's sessions by id (a live stream asks at each heartbeat whether its own still holds). */
    findSessionOf: (accountId: string, id: string) => first<SessionRow>(db('sessions').where({ id, account_id: accountId }).first(SESSION_COLUMNS), mapSession),
    listSessionsOf: async (accountId: string) =>
      (
        (await db('sessions')
          .where({ account_id: accountId })
          .orderBy([
            { column: 'created_at', order: 'desc' },
            { column: 'id', order: 'desc' },
          ])
          .select(SESSION_COLUMNS)) as SessionRow[]
      ).map(mapSession),
    /** Writes the use of a session, unless another request already wrote a later one. */
    touchSession: (id: string, at: number, idleExpiresAt: number) =>
      count(db('sessions').where({ id }).andWhere('last_seen_at', '<', at).update({ last_seen_at: at, idle_expires_at: idleExpiresAt })),
    deleteSession: (id: string, accountId: string, trx: Knex = db) => count(trx('sessions').where({ id, account_id: accountId }).del()),
    /** Ends every session of the account, but `keep` when given. */
    deleteSessionsOf: (accountId: string, keep?: string, trx: Knex = db) => {
      const q = trx('sessions').where({ account_id: accountId });
      if (keep) q.whereNot({ id: keep });
      return count(q.del());
    },
    /** Sessions past either limit; they can never be used again. */
    purgeSessions: (now: number) => count(db('sessions').where('idle_expires_at', '<=', now).orWhere('expires_at', '<=', now).del()),

    insertToken: (row: TokenRow, trx: Knex = db) => done(trx('management_tokens').insert(row)),
    /** A management token by its fingerprint, with its account's email and role on `siteId`, in one read (as a session). */
    findTokenByFingerprint: async (fingerprint: string, siteId = ''): Promise<CredentialWithRole<TokenRow> | undefined> => {
      const [row] = await tokenWithRole([fingerprint, siteId]);
      return row && mapToken(row);
    },
    findToken: (id: string) => first<TokenRow>(db('management_tokens').where({ id }).first(TOKEN_COLUMNS), mapToken),
    listTokensOf: async (accountId: string) =>
      (
        (await db('management_tokens')
          .where({ account_id: accountId })
          .orderBy([
            { column: 'created_at', order: 'desc' },
            { column: 'id', order: 'desc' },
          ])
          .select(TOKEN_COLUMNS)) as TokenRow[]
      ).map(mapToken),
    revokeToken: (id: string, accountId: string, at: number, trx: Knex = db) =>
      count(trx('management_tokens').where({ id, account_id: accountId }).whereNull('revoked_at').update({ revoked_at: at })),
    /** lastUsedAt moves at most once a minute, so reads do not become a write each. */
    touchToken: (id: string, at: number) =>
      count(
        db('management_tokens')
          .where({ id })
          .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', at - 60_000))
          .update({ last_used_at: at }),
      ),

    insertInvitation: (row: InvitationRow, trx: Knex = db) => done(trx('invitations').insert(row)),
    findInvitationByHash: (hash: string, trx: Knex = db) =>
      first<InvitationRow>(trx('invitations').where({ token_hash: hash }).first(INVITATION_COLUMNS), mapInvitation),
    /** Takes the invitation once: true for the one caller whose update found it unused and unexpired. */
    consumeInvitation: async (id: string, accountId: string, at: number, trx: Knex = db) =>
      Number(
        await trx('invitations').where({ id }).whereNull('accepted_at').andWhere('expires_at', '>', at).update({ accepted_at: at, accepted_by: accountId }),
      ) === 1,
    /** The site's invitations nobody has taken yet and that still can be, newest first by (created_at, id). */
    listPendingInvitations: async (siteId: string, at: number, maxAttempts: number, limit: number, after?: { createdAt: number; id: string }) => {
      const q = db('invitations').where({ site_id: siteId }).whereNull('accepted_at').andWhere('expires_at', '>', at).andWhere('attempts', '<', maxAttempts);
      const rows = (await newestFirst(q, limit, after).select(INVITATION_COLUMNS)) as InvitationRow[];
      return rows.map(mapInvitation);
    },
    /** Withdraws a pending invitation of the site: true when there was one to withdraw. */
    deletePendingInvitation: async (siteId: string, id: string, at: number, trx: Knex = db) =>
      (await trx('invitations').where({ id, site_id: siteId }).whereNull('accepted_at').andWhere('expires_at', '>', at).del()) > 0,
    /** Invitations that expired (or were used) more than `before`: nothing can take them any more. */
    purgeInvitations: (before: number) => count(db('invitations').where('expires_at', '<', before).del()),

    // Invitation attempts, unverified emails and the owners' lock (issue 24).
    /**
     * Takes one of the invitation's `max` password attempts, in the caller's transaction: the
     * conditional update is atomic on both engines and holds the row until commit, so the number read
     * back is this caller's. Null when none is left (or it was taken or expired meanwhile).
     */
    takeInvitationAttempt: async (id: string, max: number, at: number, trx: Knex): Promise<number | null> => {
      const n = Number(
        await trx('invitations')
          .where({ id })
          .whereNull('accepted_at')
          .andWhere('expires_at', '>', at)
          .andWhere('attempts', '<', max)
          .update({ attempts: trx.raw('attempts + 1') }),
      );
      if (n !== 1) return null;
      return Number(((await trx('invitations').where({ id }).first('attempts')) as { attempts: number | string }).attempts);
    },
    /** Gives an attempt back when the check never ran (the hashing queue was full): the guess was not made. */
    giveBackInvitationAttempt: (id: string) =>
      count(
        db('invitations')
          .where({ id })
          .andWhere('attempts', '>', 0)
          .update({ attempts: db.raw('attempts - 1') }),
      ),
    /** The seam of email verification (issue 26): its link, once followed, marks the account's email. */
    markEmailVerified: (id: string, at: number, trx: Knex = db) =>
      count(trx('accounts').where({ id }).whereNull('email_verified_at').update({ email_verified_at: at })),
    /** Moves the account to an address a link just proved: the new email is verified as of `at`. */
    setEmail: (id: string, email: string, at: number, trx: Knex = db) => count(trx('accounts').where({ id }).update({ email, email_verified_at: at })),
    /**
     * Locks the site's owner rows for the caller's transaction (the first read in it), so a change
     * that could drop an owner sees, and holds, the owners as they are: two owners demoting or
     * removing each other wait for one another instead of both counting two owners.
     */
    lockOwners: async (siteId: string, trx: Knex): Promise<string[]> =>
      ((await forUpdate(trx, trx('memberships').where({ site_id: siteId, role: 'owner' }).select('account_id'))) as { account_id: string }[]).map(
        (r) => r.account_id,
      ),
    /** One member of the site as the members list shows it, read in the caller's transaction when given. */
    findMember: (siteId: string, accountId: string, trx: Knex = db) =>
      first<MemberRow>(
        trx('memberships as m').join('accounts as a', 'a.id', 'm.account_id').where({ 'm.site_id': siteId, 'm.account_id': accountId }).first(MEMBER_COLUMNS),
        mapMember,
      ),

    insertAudit: async (rows: AuditRow[], trx: Knex = db) => {
      if (rows.length) await trx('audit_log').insert(rows);
    },
    /** One page of a site's log, newest first by (created_at, id), after `after` when given. */
    listAudit: async (siteId: string, limit: number, after?: { createdAt: number; id: string }) => {
      const q = db('audit_log').where({ site_id: siteId });
      const rows = (await newestFirst(q, limit, after).select(AUDIT_COLUMNS)) as AuditRow[];
      return rows.map(mapAudit);
    },
    purgeAudit: (before: number) => count(db('audit_log').where('created_at', '<', before).del()),

    // ---- The account's security log and re-authentication (migration 017) ----

    insertSecurityEntry: (row: SecurityLogRow, trx: Knex = db) => done(trx('security_log').insert(row)),
    /** One page of the account's own log, newest first by (created_at, id), after `after` when given. */
    listSecurityLog: async (accountId: string, limit: number, after?: { createdAt: number; id: string }) => {
      const q = db('security_log').where({ account_id: accountId });
      return ((await newestFirst(q, limit, after).select(SECURITY_LOG_COLUMNS)) as SecurityLogRow[]).map(mapSecurityEntry);
    },
    purgeSecurityLog: (before: number) => count(db('security_log').where('created_at', '<', before).del()),
    /** The session proved the password again at `at` (its sudo window opens from there). */
    markReauthenticated: (sessionId: string, accountId: string, at: number, trx: Knex = db) =>
      count(trx('sessions').where({ id: sessionId, account_id: accountId }).update({ reauthenticated_at: at })),
    /** Revokes every token of the account still in use; the ids revoked. */
    revokeTokensOf: async (accountId: string, at: number, trx: Knex = db): Promise<string[]> => {
      const ids = ((await trx('management_tokens').where({ account_id: accountId }).whereNull('revoked_at').select('id')) as { id: string }[]).map((r) => r.id);
      if (ids.length) await trx('management_tokens').whereIn('id', ids).whereNull('revoked_at').update({ revoked_at: at });
      return ids;
    },
  };
}

export type AccountStore = ReturnType<typeof createAccountStore>;
