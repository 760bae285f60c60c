import { Router } from 'express';
import type { PasswordReset } from '../accounts/password-reset';
import type { SignInThrottle } from '../accounts/throttle';
import { Body, meta, send } from './context';

/** Forgot password (openapi/manage.yaml, tag Session): public, limited like sign-in. */
export function passwordResetRoutes(reset: PasswordReset, throttle: SignInThrottle): Router {
  const router = Router();

  router.post('/password-resets', async (req, res) => {
    const { email } = req.body as Body<'PasswordResetRequest'>;
    await throttle.resetRequest(email, req.ip);
    await reset.request(email);
    // The same answer whether or not the email has an account.
    send<'PasswordResetRequestedResponse'>(res, 202, {
      data: { message: 'If an account has this email, a link to set a new password is on its way. It works once, for one hour.' },
    });
  });

  router.post('/password-resets/complete', async (req, res) => {
    const { token, newPassword } = req.body as Body<'CompletePasswordResetRequest'>;
    // A token is 32 random bytes: the per-address budget only keeps a flood of guesses slow.
    await throttle.resetLink(req.ip);
    send<'PasswordResetDoneResponse'>(res, 200, { data: await reset.complete(token, newPassword, meta(req)) });
  });

  return router;
}
