import { fakeDb } from './fake-db';
import type {
  AccountRow,
  AccountStore,
  AuditRow,
  InvitationRow,
  MemberRow,
  MembershipRow,
  SessionRow,
  SecurityLogRow,
  SetupLinkRow,
  SiteMembershipRow,
  TokenRow,
} from '../../server/accounts/store';

type Page = { createdAt: number; id: string };

/** Newest first by (created_at, id), strictly before `after` when given: the Knex store's keyset order. */
function newestFirst<R extends { created_at: number; id: string }>(rows: R[], limit: number, after?: Page): R[] {
  return rows
    .filter((r) => !after || r.created_at < after.createdAt || (r.created_at === after.createdAt && r.id < after.id))
    .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    .slice(0, limit);
}

/**
 * The accounts store in memory, for unit tests of the accounts services' rules. It answers what the
 * Knex store answers (the same type), including what the tables themselves keep: unique emails,
 * an invitation taken once and only before it expires, a setup link taken once, a revocation
 * written once. `sites` stands in for the sites table the store joins (names, the setup's owner
 * of every site).
 */
export function fakeAccountStore() {
  const accounts = new Map<string, AccountRow>();
  const memberships = new Map<string, MembershipRow>(); // `${accountId}\n${siteId}`
  const sessions = new Map<string, SessionRow>();
  const tokens = new Map<string, TokenRow>();
  const invitations = new Map<string, InvitationRow>();
  const audit: AuditRow[] = [];
  const securityLog: SecurityLogRow[] = [];
  const sites = new Map<string, { name: string; createdAt: number }>();
  let setupLink: SetupLinkRow | undefined;

  const key = (accountId: string, siteId: string) => `${accountId}\n${siteId}`;
  const copy = <T extends object>(row: T | undefined): T | undefined => row && { ...row };
  const uniqueViolation = () => Object.assign(new Error('UNIQUE constraint failed: accounts.email'), { code: 'SQLITE_CONSTRAINT_UNIQUE' });
  const emailOf = (accountId: string) => accounts.get(accountId)?.email ?? '';
  const memberOf = (m: MembershipRow): MemberRow => ({
    ...m,
    email: emailOf(m.account_id),
    email_verified_at: accounts.get(m.account_id)?.email_verified_at ?? null,
    display_name: accounts.get(m.account_id)?.display_name ?? null,
  });
  const byJoined = <R extends MembershipRow>(a: R, b: R) => a.created_at - b.created_at || (a.site_id + a.account_id < b.site_id + b.account_id ? -1 : 1);
  /** Deletes the matching rows of a map; the count of those deleted. */
  const deleteWhere = <R>(map: Map<string, R>, match: (r: R) => boolean) => {
    let n = 0;
    for (const [k, r] of map) if (match(r) && map.delete(k)) n++;
    return n;
  };
  /** Drops the rows of an append-only log written before `before`; how many went. */
  const purgeBefore = <R extends { created_at: number }>(rows: R[], before: number) => {
    const kept = rows.filter((r) => r.created_at >= before);
    const n = rows.length - kept.length;
    rows.splice(0, rows.length, ...kept);
    return n;
  };

  const store: AccountStore = {
    db: fakeDb(),
    insertAccount: async (row) => {
      if ([...accounts.values()].some((a) => a.email === row.email) || accounts.has(row.id)) throw uniqueViolation();
      accounts.set(row.id, { ...row });
    },
    hasAccounts: async () => accounts.size > 0,
    allSiteIds: async () => [...sites].sort((a, b) => a[1].createdAt - b[1].createdAt).map(([id]) => id),

    replaceSetupLink: async (row) => {
      setupLink = { ...row };
    },
    findSetupLink: async () => copy(setupLink),
    takeSetupLink: async (tokenHash, at) => {
      if (!setupLink || setupLink.token_hash !== tokenHash || setupLink.expires_at <= at) return false;
      setupLink = undefined;
      return true;
    },
    dropSetupLink: async () => {
      const had = setupLink ? 1 : 0;
      setupLink = undefined;
      return had;
    },
    findAccount: async (id) => copy(accounts.get(id)),
    findAccountByEmail: async (email) => copy([...accounts.values()].find((a) => a.email === email)),
    findVerifiedAccountByEmail: async (email) => copy([...accounts.values()].find((a) => a.email === email && a.email_verified_at !== null)),
    namesOf: async (ids) =>
      new Map(ids.filter((id) => accounts.has(id)).map((id) => [id, { displayName: accounts.get(id)!.display_name ?? null, email: emailOf(id) }])),
    setDisplayName: async (id, name) => {
      const a = accounts.get(id);
      if (!a) return 0;
      a.display_name = name;
      return 1;
    },
    emailsOf: async (ids) => new Map(ids.filter((id) => accounts.has(id)).map((id) => [id, emailOf(id)])),
    listAccounts: async () => [...accounts.values()].sort((a, b) => a.created_at - b.created_at).map((a) => ({ ...a })),
    setPassword: async (id, hash, at) => {
      const a = accounts.get(id);
      if (!a) return 0;
      Object.assign(a, { password_hash: hash, password_changed_at: at });
      return 1;
    },

    insertMembership: async (row) => {
      if (memberships.has(key(row.account_id, row.site_id))) throw uniqueViolation();
      memberships.set(key(row.account_id, row.site_id), { ...row });
    },
    findMembership: async (accountId, siteId) => copy(memberships.get(key(accountId, siteId))),
    listMembershipsOf: async (accountId) =>
      [...memberships.values()]
        .filter((m) => m.account_id === accountId && sites.has(m.site_id))
        .sort(byJoined)
        .map((m): SiteMembershipRow => ({ ...m, site_name: sites.get(m.site_id)!.name })),
    listMembers: async (siteId) =>
      [...memberships.values()]
        .filter((m) => m.site_id === siteId)
        .sort(byJoined)
        .map(memberOf),
    setRole: async (accountId, siteId, role) => {
      const m = memberships.get(key(accountId, siteId));
      if (!m) return 0;
      m.role = role;
      return 1;
    },
    deleteMembership: async (accountId, siteId) => (memberships.delete(key(accountId, siteId)) ? 1 : 0),

    insertSession: async (row) => {
      sessions.set(row.id, { ...row });
    },
    findSessionByHash: async (hash, siteId = '') => {
      const s = [...sessions.values()].find((x) => x.token_hash === hash);
      return s && { ...s, email: emailOf(s.account_id), site_role: memberships.get(key(s.account_id, siteId))?.role ?? null };
    },
    findSessionOf: async (accountId, id) => {
      const s = sessions.get(id);
      return s?.account_id === accountId ? { ...s } : undefined;
    },
    listSessionsOf: async (accountId) =>
      newestFirst(
        [...sessions.values()].filter((s) => s.account_id === accountId),
        Infinity,
      ).map((s) => ({ ...s })),
    touchSession: async (id, at, idleExpiresAt) => {
      const s = sessions.get(id);
      if (!s || s.last_seen_at >= at) return 0;
      Object.assign(s, { last_seen_at: at, idle_expires_at: idleExpiresAt });
      return 1;
    },
    deleteSession: async (id, accountId) => deleteWhere(sessions, (s) => s.id === id && s.account_id === accountId),
    deleteSessionsOf: async (accountId, keep) => deleteWhere(sessions, (s) => s.account_id === accountId && s.id !== keep),
    purgeSessions: async (now) => deleteWhere(sessions, (s) => s.idle_expires_at <= now || s.expires_at <= now),

    insertToken: async (row) => {
      tokens.set(row.id, { ...row });
    },
    findTokenByFingerprint: async (fingerprint, siteId = '') => {
      const t = [...tokens.values()].find((x) => x.fingerprint === fingerprint);
      return t && { ...t, email: emailOf(t.account_id), site_role: memberships.get(key(t.account_id, siteId))?.role ?? null };
    },
    findToken: async (id) => copy(tokens.get(id)),
    listTokensOf: async (accountId) =>
      newestFirst(
        [...tokens.values()].filter((t) => t.account_id === accountId),
        Infinity,
      ).map((t) => ({ ...t })),
    revokeToken: async (id, accountId, at) => {
      const t = tokens.get(id);
      if (!t || t.account_id !== accountId || t.revoked_at !== null) return 0;
      t.revoked_at = at;
      return 1;
    },
    touchToken: async (id, at) => {
      const t = tokens.get(id);
      if (!t || (t.last_used_at !== null && t.last_used_at >= at - 60_000)) return 0;
      t.last_used_at = at;
      return 1;
    },

    insertInvitation: async (row) => {
      invitations.set(row.id, { ...row });
    },
    findInvitationByHash: async (hash) => copy([...invitations.values()].find((i) => i.token_hash === hash)),
    consumeInvitation: async (id, accountId, at) => {
      const i = invitations.get(id);
      if (!i || i.accepted_at !== null || i.expires_at <= at) return false;
      Object.assign(i, { accepted_at: at, accepted_by: accountId });
      return true;
    },
    listPendingInvitations: async (siteId, at, maxAttempts, limit, after) =>
      newestFirst(
        [...invitations.values()].filter((i) => i.site_id === siteId && i.accepted_at === null && i.expires_at > at && i.attempts < maxAttempts),
        limit,
        after,
      ).map((i) => ({ ...i })),
    deletePendingInvitation: async (siteId, id, at) =>
      deleteWhere(invitations, (i) => i.id === id && i.site_id === siteId && i.accepted_at === null && i.expires_at > at) > 0,
    purgeInvitations: async (before) => deleteWhere(invitations, (i) => i.expires_at < before),

    // Invitation attempts, unverified emails and the owners' lock (issue 24); one caller at a time here, so no lock is needed.
    takeInvitationAttempt: async (id, max, at) => {
      const i = invitations.get(id);
      if (!i || i.accepted_at !== null || i.expires_at <= at || i.attempts >= max) return null;
      return ++i.attempts;
    },
    giveBackInvitationAttempt: async (id) => {
      const i = invitations.get(id);
      if (!i || i.attempts <= 0) return 0;
      i.attempts--;
      return 1;
    },
    setEmail: async (id, email, at) => {
      const a = accounts.get(id);
      if (!a) return 0;
      a.email = email;
      a.email_verified_at = at;
      return 1;
    },
    markEmailVerified: async (id, at) => {
      const a = accounts.get(id);
      if (!a || a.email_verified_at !== null) return 0;
      a.email_verified_at = at;
      return 1;
    },
    lockOwners: async (siteId) => [...memberships.values()].filter((m) => m.site_id === siteId && m.role === 'owner').map((m) => m.account_id),
    findMember: async (siteId, accountId) => {
      const m = memberships.get(key(accountId, siteId));
      return m && memberOf(m);
    },

    insertAudit: async (rows) => {
      audit.push(...rows.map((r) => ({ ...r })));
    },
    listAudit: async (siteId, limit, after) =>
      newestFirst(
        audit.filter((r) => r.site_id === siteId),
        limit,
        after,
      ).map((r) => ({ ...r })),
    purgeAudit: async (before) => purgeBefore(audit, before),

    insertSecurityEntry: async (row) => void securityLog.push({ ...row }),
    listSecurityLog: async (accountId, limit, after) =>
      newestFirst(
        securityLog.filter((r) => r.account_id === accountId),
        limit,
        after,
      ).map((r) => ({ ...r })),
    purgeSecurityLog: async (before) => purgeBefore(securityLog, before),
    markReauthenticated: async (sessionId, accountId, at) => {
      const s = sessions.get(sessionId);
      if (!s || s.account_id !== accountId) return 0;
      s.reauthenticated_at = at;
      return 1;
    },
    revokeTokensOf: async (accountId, at) => {
      const ids = [...tokens.values()].filter((t) => t.account_id === accountId && t.revoked_at === null).map((t) => t.id);
      for (const id of ids) tokens.get(id)!.revoked_at = at;
      return ids;
    },
  };

  return {
    store,
    /** A site the store's joins see (the sites table is the access store's). */
    addSite: (id: string, name = id, createdAt = 0) => void sites.set(id, { name, createdAt }),
    /** What a test inspects besides the store's answers. */
    sessions: () => [...sessions.values()].map((s) => ({ ...s })),
    audit: () => audit.map((r) => ({ ...r })),
    securityLog: () => securityLog.map((r) => ({ ...r })),
  };
}

export type FakeAccountStore = ReturnType<typeof fakeAccountStore>;
