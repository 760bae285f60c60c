import { Router } from 'express';
import type { SignInThrottle } from '../accounts/throttle';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { clearedSessionCookie, sessionCookie } from './guards';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import { actor, Body, meta, send, signedIn } from './context';
import { inboxRoutes } from './inbox-routes';
import { tokenRoutes } from './tokens-routes';
import { memberRoutes } from './members-routes';
import { invitationRoutes } from './invitations-routes';

/**
 * The account operations of openapi/manage.yaml: sign-in, sessions and the password here, then
 * tokens, members and invitations, each a call into its accounts service. The entry (entry.ts)
 * has authenticated, checked the origin and validated by then.
 */
export function manageRoutes(services: Services, throttle: SignInThrottle, logger: Logger, limiter: RateLimiter): Router {
  const { signIn: accounts, setup } = services.accounts;
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

  router.post('/setup', async (req, res) => {
    const { token, email, password } = req.body as Body<'SetupRequest'>;
    const made = await setup.complete(token, email, password, meta(req));
    res.setHeader('Set-Cookie', sessionCookie(made.session.token, made.session.cookieMaxAge));
    send<'SetupResponse'>(res, 201, { data: { account: made.account, sites: made.sites, session: made.session.session } });
  });

  router.use(tokenRoutes(services.accounts.tokens));
  router.use(memberRoutes(services.accounts));
  router.use(invitationRoutes(services.accounts.invitations, throttle, limiter));
  return router;
}
