import { Router } from 'express';
import type { MailLog } from '../mail/log';
import { actor, send } from './context';

/** A site's mail log and its test email (openapi/manage.yaml, tag Email); owners only (`x-role`, checked by the entry). */
export function mailRoutes({ log }: { log: MailLog }): Router {
  const router = Router();

  router.get('/sites/:siteId/mail-log', async (req, res) => {
    send<'MailLogList'>(res, 200, await log.page(req.params.siteId, req.query as { limit?: number; cursor?: string }));
  });

  router.post('/sites/:siteId/mail-log/test', async (req, res) => {
    send<'TestEmailResponse'>(res, 202, { data: await log.sendTest(actor(req), req.params.siteId) });
  });

  return router;
}
