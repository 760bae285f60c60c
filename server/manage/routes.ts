import { Router } from 'express';
import type { SignInThrottle } from '../accounts/throttle';
import { DEVICE_COOKIE_MAX_AGE_SECONDS } from '../accounts/throttle';
import { clearedSessionCookie, deviceCookie, deviceCookieOf, sessionCookie } from './guards';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import { actor, Body, meta, send, signedIn } from './context';
import { inboxRoutes } from './inbox-routes';
import { noteRoutes } from './notes-routes';
import { liveRoutes } from './live-routes';
import { tokenRoutes } from './tokens-routes';
import { memberRoutes } from './members-routes';
import { invitationRoutes } from './invitations-routes';
import { replyRoutes } from './replies-routes';
import { tagRoutes } from './tags-routes';
import { mailRoutes } from './mail-routes';
import { passwordResetRoutes } from './password-reset-routes';
import { emailRoutes } from './email-routes';
import { alertRoutes } from './alerts-routes';

/**
 * The account operations of openapi/manage.yaml: sign-in, sessions and the password here, then
 * tokens, members and invitations, each a call into its accounts service. The entry (entry.ts)
 * has authenticated, checked the origin and validated by then.
 */
export function manageRoutes(services: Services, throttle: SignInThrottle, logger: Logger, limiter: RateLimiter): Router {
  const { signIn: accounts, setup } = services.accounts;
  const router = Router();
  router.use(inboxRoutes(services, logger));
  router.use(noteRoutes(services));
  router.use(liveRoutes(services));

  router.post('/session', async (req, res) => {
    const { email, password } = req.body as Body<'SignInRequest'>;
    const attempt = await throttle.attempt(email, req.ip, deviceCookieOf(req.headers.cookie));
    const signed = await attempt.run(() => accounts.signIn(email, password, meta(req)));
    // The session the browser held until now ends: one browser, one session (no fixation).
    if (req.manager?.sessionId) await accounts.signOut(req.manager, meta(req));
    // The session cookie first: one Set-Cookie per cookie, and clients that read one read that one.
    res.setHeader('Set-Cookie', [
      sessionCookie(signed.token, signed.cookieMaxAge),
      deviceCookie(throttle.deviceCookieFor(signed.account.email), DEVICE_COOKIE_MAX_AGE_SECONDS),
    ]);
    send<'SignInResponse'>(res, 200, { data: { account: signed.account, session: signed.session } });
  });

  router.post('/session/sudo', async (req, res) => {
    const { password } = req.body as Body<'SudoRequest'>;
    const manager = signedIn(req);
    const attempt = await throttle.proof(manager.accountId);
    send<'SudoResponse'>(res, 200, { data: await attempt.run(() => accounts.reauthenticate(manager, password, meta(req))) });
  });

  router.get('/security-log', async (req, res) => {
    send<'SecurityLogList'>(res, 200, await services.accounts.securityLog.page(signedIn(req), req.query as { limit?: number; cursor?: string }));
  });

  // Answers 200 whether signed in or not: a page asks without logging a failed request.
  router.get('/session', async (req, res) => {
    const manager = req.manager;
    const session = manager?.sessionId ? (await accounts.listSessions(manager)).find((s) => s.current) : undefined;
    const data = manager && session ? { account: (await accounts.me(manager)).account, session } : null;
    send<'CurrentSessionResponse'>(res, 200, { data });
  });

  router.delete('/session', async (req, res) => {
    await accounts.signOut(signedIn(req), meta(req));
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
    await accounts.endSession(signedIn(req), req.params.sessionId, meta(req));
    res.status(204).end();
  });

  router.post('/password', async (req, res) => {
    const { currentPassword, newPassword, revokeTokens } = req.body as Body<'ChangePasswordRequest'>;
    // A password guess from a signed-in account: its own budget, never the sign-in one (which
    // anyone who knows the email can spend).
    const attempt = await throttle.proof(signedIn(req).accountId);
    await attempt.run(() => accounts.changePassword(actor(req), currentPassword, newPassword, revokeTokens ?? false));
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
  router.use(replyRoutes({ replies: services.replies, siteAdmin: services.siteAdmin, profile: services.accounts.profile, signIn: accounts }));
  router.use(tagRoutes(services.tags));
  router.use(mailRoutes(services.mail));
  router.use(alertRoutes(services.agentAlerts.service));
  router.use(passwordResetRoutes(services.accounts.passwordReset, throttle));
  router.use(emailRoutes(services.accounts.emailVerification, throttle));
  return router;
}
