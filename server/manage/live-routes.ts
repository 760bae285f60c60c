import { Router } from 'express';
import type { Services } from '../services';
import { send, signedIn, type Body } from './context';

/**
 * Typing and "seen" on the inbox's side (openapi/manage.yaml, `x-role: member`, checked by the
 * entry): the member's typing told to the visitor's window and the other members, and the
 * visitor's "seen" mark read. The rules are window/live-signals.ts's, shared with the window's side.
 */
export function liveRoutes(services: Services): Router {
  const signals = services.window.signals;
  const router = Router();
  const base = '/sites/:siteId/inbox/conversations/:conversationId';

  router.post(`${base}/typing`, async (req, res) => {
    const body = req.body as Body<'TypingRequest'>;
    await signals.agentTyping(req.params.siteId, req.params.conversationId, signedIn(req).accountId, body.typing);
    res.status(204).end();
  });

  router.get(`${base}/seen`, async (req, res) => {
    send<'SeenMarkResponse'>(res, 200, { data: await signals.seenOf(req.params.siteId, req.params.conversationId) });
  });

  return router;
}
