import { ApiError, invalid } from '../platform/errors';
import { toIso, toIsoRequired } from '../platform/time';
import { normaliseEmail, passwordProblem } from './passwords';
import { sessionExpiry } from './session-rules';
import type { AuditActor } from './audit';
import { memberDisplayName } from '../visitors/display-name';
import type { AccountRow, InvitationRow, MemberRow, Role, SessionRow, SiteMembershipRow, TokenRow } from './store';

/** What the accounts services share: who calls, the input checks, the errors said alike, and the one DTO of each row. */

/** Who is calling the management API: an account, by a session cookie or a management token. */
export interface Manager {
  accountId: string;
  email: string;
  via: 'session' | 'token';
  sessionId?: string;
  tokenId?: string;
  /** Seconds the session cookie may still live (sessions only). */
  cookieMaxAge?: number;
  /** Until when the session may do what needs a recent password proof (sessions only; session-rules.ts). */
  sudoUntil?: number;
  /**
   * The account's role on the site the request's path names, read with the credential (null: not
   * a member); the role step uses it instead of reading the membership again.
   */
  roleOn?: { siteId: string; role: Role | null };
}

/** Who did something, for the audit log; `manager` null is the operator CLI. */
export interface Actor extends AuditActor {
  manager: Manager | null;
  /** The request's user agent, for the account's security log. */
  userAgent?: string | null;
}

/** An actor that is a signed-in account (every management API change). */
export type SignedActor = Actor & { manager: Manager };

export const CLI_ACTOR: Actor = { manager: null, clientIp: null };

/** What a new session records of the browser that opened it. */
export interface ClientMeta {
  userAgent?: string;
  clientIp?: string | null;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}\.[^\s@]{1,63}$/;

export function checkEmail(raw: string, path = '/body/email'): string {
  const email = normaliseEmail(raw);
  if (email.length > 254 || !EMAIL.test(email)) throw invalid('The email address is not valid.', [{ path, message: 'must be an email address' }]);
  return email;
}

export function checkPassword(password: string, path = '/body/password') {
  const problem = passwordProblem(password);
  if (problem) throw invalid(`The password ${problem}.`, [{ path, message: problem }]);
}

export const wrongCredentials = () => new ApiError('unauthorized', 'The email or password is wrong.');
export const notSignedIn = () => new ApiError('unauthorized', 'Sign in (session cookie) or send Authorization: Bearer wcm_...');
export const noSuchSite = () => new ApiError('not_found', 'Site not found.');
export const onlyOwners = () => new ApiError('forbidden', 'Only an owner of the site may do this.');
export const noSuchMember = () => new ApiError('not_found', 'Member not found.');
/**
 * 403 `reauthentication_required` unless the caller may do what needs a recent password proof now:
 * a session inside its sudo window, or a management token when `tokens` allows one (a token was
 * minted inside a window, so it carries that proof; it never mints another token or changes the
 * password, which have no password of their own to re-prove).
 */
export function sudoRefusal(manager: Manager, at: number, tokens: boolean): ApiError | null {
  if (manager.via === 'token') return tokens ? null : new ApiError('forbidden', 'A management token cannot do this: sign in, then confirm your password.');
  if (manager.sudoUntil !== undefined && at < manager.sudoUntil) return null;
  return new ApiError('reauthentication_required', 'Confirm your password first (POST /manage/v1/session/sudo), then retry.');
}

export const throwIf = (err: ApiError | null) => {
  if (err) throw err;
};

export const lastOwner = () => new ApiError('forbidden', 'A site keeps at least one owner: make another member owner first.');

export function accountToDto(a: AccountRow) {
  return {
    id: a.id,
    email: a.email,
    createdAt: toIsoRequired(a.created_at),
    passwordChangedAt: toIsoRequired(a.password_changed_at),
    emailVerified: a.email_verified_at !== null,
    displayName: a.display_name ?? null,
    name: memberDisplayName({ displayName: a.display_name ?? null, email: a.email }),
  };
}

export function sessionToDto(s: SessionRow, currentId?: string) {
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

export function pendingInvitationToDto(i: InvitationRow) {
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

/** `passwordChangedAt`: the account's; a token still in use made before it is flagged. */
export function tokenToDto(t: TokenRow, passwordChangedAt: number) {
  return {
    id: t.id,
    label: t.label,
    prefix: t.display_prefix,
    createdAt: toIsoRequired(t.created_at),
    lastUsedAt: toIso(t.last_used_at),
    revokedAt: toIso(t.revoked_at),
    madeBeforePasswordChange: t.revoked_at === null && t.created_at < passwordChangedAt,
  };
}

export const memberToDto = (m: MemberRow) => ({
  accountId: m.account_id,
  email: m.email,
  role: m.role,
  joinedAt: toIsoRequired(m.created_at),
  emailVerified: m.email_verified_at !== null,
  displayName: m.display_name ?? null,
  name: memberDisplayName({ displayName: m.display_name ?? null, email: m.email }),
});
export const siteToDto = (m: SiteMembershipRow) => ({ id: m.site_id, name: m.site_name, role: m.role, joinedAt: toIsoRequired(m.created_at) });

/** The site ids of an account's memberships (an account-wide change is audited on each). */
export const siteIdsOf = async (store: { listMembershipsOf(accountId: string): Promise<SiteMembershipRow[]> }, accountId: string) =>
  (await store.listMembershipsOf(accountId)).map((m) => m.site_id);
