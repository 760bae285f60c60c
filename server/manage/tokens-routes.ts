import { Router } from 'express';
import type { Tokens } from '../accounts/tokens';
import { actor, Body, send, signedIn } from './context';

/** The account's management tokens (openapi/manage.yaml, tag Tokens). */
export function tokenRoutes(tokens: Tokens): Router {
  const router = Router();

  router.get('/tokens', async (req, res) => {
    send<'TokenList'>(res, 200, { data: await tokens.list(signedIn(req)) });
  });

  router.post('/tokens', async (req, res) => {
    const { label } = req.body as Body<'CreateTokenRequest'>;
    send<'CreatedTokenResponse'>(res, 201, { data: (await tokens.create(actor(req), label)) as Body<'CreatedToken'> });
  });

  router.delete('/tokens/:id', async (req, res) => {
    await tokens.revoke(actor(req), req.params.id);
    res.status(204).end();
  });

  return router;
}
