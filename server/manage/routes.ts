import { Request, Response, Router } from 'express';
import type { components } from './generated/api';
import type { AccountsService, Actor, Manager } from '../accounts/service';
import type { SignInThrottle } from '../accounts/throttle';
import { clearedSessionCookie, sessionCookie } from './guards';
import { invalid } from '../platform/errors';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import { inboxRoutes } from './inbox-routes';

type Schemas = components['schemas'];
type Body<T extends keyof Schemas> = Schemas[T];

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The signed-in account (management entry only). */
      manager?: Manager;
    }
  }
}

const meta = (req: Request) => ({ userAgent: req.headers['user-agent'], clientIp: req.ip ?? null });
const signedIn = (req: Request) => req.manager!;
const actor = (req: Request): Actor & { manager: Manager } => ({ manager: signedIn(req), clientIp: req.ip ?? null });
const send = <T extends keyof Schemas>(res: Response, status: number, body: Body<T>) => res.status(status).json(body);

/**
 * The operations of openapi/manage.yaml, each a call into the accounts service; who may do what is
 * decided there. The entry (entry.ts) has authenticated, checked the origin and validated by then.
 */
export function manageRoutes(accounts: AccountsService, throttle: SignInThrottle, services: Services, logger: Logger): Router {
  const router = Router();
  router.use(inboxRoutes(services, logger));

  router.post('/session', async (req, res) => {
    const { email, password } = req.body as Body<'SignInRequest'>;
    const attempt = await throttle.attempt(email, req.ip);
    const signed = await accounts.signIn(email, password, meta(req));
    await attempt.succeeded();
    // The session the browser held until now ends: one browser, one session (no fixation).
    if (req.manager?.sessionId) await accounts.signOut(req.manager);
    res.setHeader('Set-Cookie', sessionCookie(signed.token, signed.cookieMaxAge));
    send<'SignInResponse'>(res, 200, { data: { account: signed.account, session: signed.session } });
  });

  // Answers 200 whether signed in or not: a page asks without logging a failed request.
  router.get('/session', async (req, res) => {
    const manager = req.manager;
    const session = manager?.sessionId ? (await accounts.listSessions(manager)).find((s) => s.current) : undefined;
    const data = manager && session ? { account: (await accounts.me(manager)).account, session } : null;
    send<'CurrentSessionResponse'>(res, 200, { data });
  });

  router.delete('/session', async (req, res) => {
    await accounts.signOut(signedIn(req));
    res.setHeader('Set-Cookie', clearedSessionCookie());
    res.status(204).end();
  });

  router.get('/me', async (req, res) => {
    send<'MeResponse'>(res, 200, { data: await accounts.me(signedIn(req)) });
  });

  router.get('/sessions', async (req, res) => {
    send<'SessionList'>(res, 200, { data: await accounts.listSessions(signedIn(req)) });
  });

  router.delete('/sessions/:sessionId', async (req, res) => {
    await accounts.endSession(signedIn(req), req.params.sessionId);
    res.status(204).end();
  });

  router.post('/password', async (req, res) => {
    const { currentPassword, newPassword } = req.body as Body<'ChangePasswordRequest'>;
    // Proving the current password is a password guess like a sign-in: the same budgets.
    const attempt = await throttle.attempt(signedIn(req).email, req.ip);
    await accounts.changePassword(actor(req), currentPassword, newPassword);
    await attempt.succeeded();
    res.status(204).end();
  });

  router.get('/tokens', async (req, res) => {
    send<'TokenList'>(res, 200, { data: await accounts.listTokens(signedIn(req)) });
  });

  router.post('/tokens', async (req, res) => {
    const { label } = req.body as Body<'CreateTokenRequest'>;
    send<'CreatedTokenResponse'>(res, 201, { data: (await accounts.createToken(actor(req), label)) as Body<'CreatedToken'> });
  });

  router.delete('/tokens/:id', async (req, res) => {
    await accounts.revokeToken(actor(req), req.params.id);
    res.status(204).end();
  });

  router.get('/sites', async (req, res) => {
    send<'SiteList'>(res, 200, { data: await accounts.mySites(signedIn(req)) });
  });

  router.get('/sites/:siteId/members', async (req, res) => {
    send<'MemberList'>(res, 200, { data: await accounts.listMembers(signedIn(req), req.params.siteId) });
  });

  router.patch('/sites/:siteId/members/:accountId', async (req, res) => {
    const { role } = req.body as Body<'ChangeRoleRequest'>;
    send<'MemberResponse'>(res, 200, { data: await accounts.changeRole(actor(req), req.params.siteId, req.params.accountId, role) });
  });

  router.delete('/sites/:siteId/members/:accountId', async (req, res) => {
    await accounts.removeMember(actor(req), req.params.siteId, req.params.accountId);
    res.status(204).end();
  });

  router.delete('/sites/:siteId/members/:accountId/sessions', async (req, res) => {
    send<'EndedSessionsResponse'>(res, 200, { data: await accounts.endMemberSessions(actor(req), req.params.siteId, req.params.accountId) });
  });

  router.post('/sites/:siteId/invitations', async (req, res) => {
    const { email, role } = req.body as Body<'InvitationRequest'>;
    send<'InvitationResponse'>(res, 201, { data: await accounts.createInvitation(actor(req), req.params.siteId, email, role) });
  });

  router.get('/sites/:siteId/invitations', async (req, res) => {
    const query = req.query as { limit?: number; cursor?: string };
    send<'InvitationList'>(res, 200, await accounts.listInvitations(signedIn(req), req.params.siteId, query));
  });

  router.delete('/sites/:siteId/invitations/:invitationId', async (req, res) => {
    await accounts.revokeInvitation(actor(req), req.params.siteId, req.params.invitationId);
    res.status(204).end();
  });

  router.post('/invitations/accept', async (req, res) => {
    const { token, email, password } = req.body as Body<'AcceptInvitationRequest'>;
    let who: Parameters<AccountsService['acceptInvitation']>[1];
    let attempt: { succeeded(): Promise<void> } | undefined;
    if (req.manager) {
      who = { manager: req.manager };
    } else {
      if (email === undefined || password === undefined) {
        throw invalid('Send email and password, or sign in first.', [{ path: '/body', message: 'needs email and password when not signed in' }]);
      }
      attempt = await throttle.attempt(email, req.ip);
      who = { email, password };
    }
    const joined = await accounts.acceptInvitation(token, who, meta(req));
    await attempt?.succeeded();
    if (joined.session) res.setHeader('Set-Cookie', sessionCookie(joined.session.token, joined.session.cookieMaxAge));
    send<'AcceptInvitationResponse'>(res, 200, { data: { account: joined.account, site: joined.site, session: joined.session?.session ?? null } });
  });

  router.post('/setup', async (req, res) => {
    const { token, email, password } = req.body as Body<'SetupRequest'>;
    const made = await accounts.completeSetup(token, email, password, meta(req));
    res.setHeader('Set-Cookie', sessionCookie(made.session.token, made.session.cookieMaxAge));
    send<'SetupResponse'>(res, 201, { data: { account: made.account, sites: made.sites, session: made.session.session } });
  });

  router.get('/sites/:siteId/audit-log', async (req, res) => {
    const query = req.query as { limit?: number; cursor?: string };
    send<'AuditList'>(res, 200, await accounts.auditLog(signedIn(req), req.params.siteId, query));
  });

  return router;
}
