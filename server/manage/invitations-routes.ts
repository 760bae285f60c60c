import { Router } from 'express';
import { Invitations, Invitee, spendInvitationBudget } from '../accounts/invitations';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { SignInThrottle } from '../accounts/throttle';
import { invalid } from '../platform/errors';
import { sessionCookie } from './guards';
import { actor, Body, meta, send } from './context';

/** A site's invitations and their acceptance (openapi/manage.yaml, tag Members). */
export function invitationRoutes(invitations: Invitations, throttle: SignInThrottle, limiter: RateLimiter): Router {
  const router = Router();

  router.post('/sites/:siteId/invitations', async (req, res) => {
    const { email, role } = req.body as Body<'InvitationRequest'>;
    const who = actor(req);
    const siteId = req.params.siteId;
    const admit = () => spendInvitationBudget(limiter, siteId, who.manager.accountId);
    send<'InvitationResponse'>(res, 201, { data: await invitations.create(who, siteId, email, role, admit) });
  });

  router.get('/sites/:siteId/invitations', async (req, res) => {
    const query = req.query as { limit?: number; cursor?: string };
    send<'InvitationList'>(res, 200, await invitations.list(req.params.siteId, query));
  });

  router.delete('/sites/:siteId/invitations/:invitationId', async (req, res) => {
    await invitations.revoke(actor(req), req.params.siteId, req.params.invitationId);
    res.status(204).end();
  });

  router.post('/invitations/accept', async (req, res) => {
    const { token, email, password } = req.body as Body<'AcceptInvitationRequest'>;
    let who: Invitee;
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
    const joined = await invitations.accept(token, who, meta(req));
    await attempt?.succeeded();
    if (joined.session) res.setHeader('Set-Cookie', sessionCookie(joined.session.token, joined.session.cookieMaxAge));
    send<'AcceptInvitationResponse'>(res, 200, { data: { account: joined.account, site: joined.site, session: joined.session?.session ?? null } });
  });

  return router;
}
