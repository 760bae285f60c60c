import { Router } from 'express';
import type { EmailVerification } from '../accounts/email-verification';
import type { SignInThrottle } from '../accounts/throttle';
import { actor, Body, meta, send, signedIn } from './context';

/** Verified email and changing it (openapi/manage.yaml, tag Session). */
export function emailRoutes(verification: EmailVerification, throttle: SignInThrottle): Router {
  const router = Router();

  router.post('/email-verifications', async (req, res) => {
    send<'EmailVerificationResponse'>(res, 202, { data: await verification.resend(actor(req)) });
  });

  router.post('/email-changes', async (req, res) => {
    const { newEmail, password } = req.body as Body<'EmailChangeRequest'>;
    // A password guess from a signed-in account: its own budget, as changing the password.
    const attempt = await throttle.proof(signedIn(req).accountId);
    await attempt.run(() => verification.requestChange(actor(req), newEmail, password, meta(req)));
    send<'PasswordResetRequestedResponse'>(res, 202, {
      data: { message: 'A link is on its way to the new address: the email changes when it is used (within 24 hours).' },
    });
  });

  router.post('/email-links/complete', async (req, res) => {
    const { token } = req.body as Body<'CompleteEmailLinkRequest'>;
    // A token is 32 random bytes: the per-address budget only keeps a flood of guesses slow.
    await throttle.resetLink(req.ip);
    send<'EmailLinkDoneResponse'>(res, 200, { data: await verification.complete(token, meta(req)) });
  });

  return router;
}
