import type { Request, RequestHandler } from 'express';
import type { Members } from '../accounts/members';
import { notSignedIn, type Manager } from '../accounts/common';
import { checkRole } from '../accounts/members';
import type { ApiError } from '../platform/errors';
import type { Role as SiteRole } from '../accounts/store';

/**
 * The role each management operation needs, declared in openapi/manage.yaml as `x-role` beside its
 * `security` (as the public API's scopes are), and enforced here in one step:
 *  - `public`: no credential needed (signing in, accepting an invitation, the first-start setup);
 *  - `account`: any signed-in account (itself, its sessions, tokens and sites, a new site);
 *  - `member`: a member of the site the `siteId` path parameter names, owner or agent;
 *  - `owner`: an owner of that site.
 * A site the caller is not a member of answers 404 `not_found`, exactly like a missing one; an
 * agent on an owner's operation 403 `forbidden`.
 */
export const OPERATION_ROLES = ['public', 'account', 'member', 'owner'] as const;
export type OperationRole = (typeof OPERATION_ROLES)[number];

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The caller's membership of the operation's site, resolved once by the role step (`member` and `owner` operations). */
      membership?: { siteId: string; role: SiteRole };
    }
  }
}

/**
 * An operation's `x-sudo`, beside its `x-role`: what turns a stolen session into lasting access
 * needs the password proved in the last 10 minutes. `true`: a session inside its window, or a
 * management token; `session`: a session inside its window only; `owner-role`: checked by the
 * service, which alone knows whether the change makes an owner.
 */
export type SudoMark = true | 'session' | 'owner-role';

type Operation = { 'x-role'?: unknown; 'x-sudo'?: SudoMark; 'x-cross-site'?: unknown };
type PathItem = Record<string, Operation>;
const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

const isRole = (value: unknown): value is OperationRole => (OPERATION_ROLES as readonly unknown[]).includes(value);

/** An operation's declared role; an operation without a valid one is the document's bug, refused rather than let through. */
export function declaredRole(operation: Operation | undefined, name: string): OperationRole {
  const role = operation?.['x-role'];
  if (!isRole(role)) throw new Error(`${name} declares no valid x-role (one of ${OPERATION_ROLES.join(', ')})`);
  return role;
}

/** The declared role of the document's `method` `template` operation. */
export function documentedRole(document: { paths: Record<string, PathItem> }, method: string, template: string): OperationRole {
  return declaredRole(document.paths[template]?.[method], `${method.toUpperCase()} ${template}`);
}

/** Requests, by method and path alone, for the document's operations that `declares`. */
function operationMatcher(
  document: { paths: Record<string, PathItem> },
  declares: (operation: Operation, name: string) => boolean,
): (req: Pick<Request, 'method' | 'path'>) => boolean {
  const matching: { method: string; path: RegExp }[] = [];
  for (const [template, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      if (!item[method] || !declares(item[method], `${method.toUpperCase()} ${template}`)) continue;
      const pattern = template
        .split(/(\{[^}]+\})/)
        .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
        .join('');
      matching.push({ method: method.toUpperCase(), path: new RegExp(`^${pattern}$`) });
    }
  }
  return (req) => matching.some((o) => o.method === req.method && o.path.test(req.path));
}

/**
 * Whether a request is for a `public` operation, by method and path alone. Authentication runs
 * before the validator has matched an operation, so this matcher is built from the same
 * declaration: a path no public operation has is not credential-free, so without a credential it
 * is 401 whether or not the path exists (as before), and signed in, the validator's 404 or 405.
 */
export function credentialFreeMatcher(document: { paths: Record<string, PathItem> }) {
  return operationMatcher(document, (operation, name) => declaredRole(operation, name) === 'public');
}

/**
 * Whether a request is for an operation marked `x-cross-site: true`: a change another site may
 * post, because its credential is in its URL and never ambient (one-click unsubscribe, RFC 8058,
 * is posted by mail providers). Only a `public` operation may carry the mark.
 */
export function crossSiteMatcher(document: { paths: Record<string, PathItem> }) {
  return operationMatcher(document, (operation, name) => {
    if (operation['x-cross-site'] === undefined) return false;
    if (operation['x-cross-site'] !== true || declaredRole(operation, name) !== 'public')
      throw new Error(`${name}: x-cross-site must be true, on a public operation`);
    return true;
  });
}

/**
 * The caller's membership of `siteId` for an operation that needs `role`, put on the request: 404
 * for a site it is not a member of, 403 for an agent where an owner is needed. Asked once a request
 * (a multipart reply asks before its files are spooled; the role step then finds it resolved).
 */
export async function resolveMembership(members: Pick<Members, 'requireRole'>, req: Request, role: 'member' | 'owner', siteId: string) {
  if (!req.manager) throw notSignedIn();
  if (req.membership?.siteId === siteId && (role === 'member' || req.membership.role === 'owner')) return;
  // Read with the credential when the path named this site (manage/entry.ts), else read now.
  const known = req.manager.roleOn;
  if (known?.siteId === siteId) req.membership = { siteId, role: checkRole(known.role, role) };
  else req.membership = { siteId, role: (await members.requireRole(req.manager, siteId, role)).role };
}

/**
 * The role step: after the validator has matched the operation (its `x-role` read as
 * `requireScopes` reads `security`), before any route. Then its `x-sudo`, by `sudoRefusal`
 * (accounts/sign-in.ts on the service's clock), once the role has passed: an agent hears
 * `forbidden`, never that a password would help.
 */
export function requireRole(
  members: Pick<Members, 'requireRole'>,
  sudoRefusal: (manager: Manager, tokens: boolean) => ApiError | null = () => null,
): RequestHandler {
  return async (req, _res, next) => {
    try {
      // The validator's match: the operation and its path parameters (Express resets `req.params` at each layer).
      const operation = (req as Request & { openapi?: { schema?: Operation; openApiRoute?: string; pathParams?: Record<string, string> } }).openapi;
      const role = declaredRole(operation?.schema, `${req.method} ${operation?.openApiRoute ?? req.path}`);
      if (role === 'public') return next();
      if (!req.manager) throw notSignedIn();
      if (role !== 'account') {
        const siteId = operation?.pathParams?.siteId;
        if (typeof siteId !== 'string') throw new Error(`${role} operation ${req.method} ${req.path} has no siteId path parameter`);
        await resolveMembership(members, req, role, siteId);
      }
      const sudo = operation?.schema?.['x-sudo'];
      if (sudo === true || sudo === 'session') {
        const refusal = sudoRefusal(req.manager, sudo === true);
        if (refusal) throw refusal;
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}
