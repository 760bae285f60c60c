import { Router } from 'express';
import type { AgentAlerts } from '../agent-alerts/service';
import { actor, Body, send } from './context';

/** A member's own emails of waiting visitors on a site (openapi/manage.yaml, tag Email; `x-role: member`). */
export function alertRoutes(alerts: AgentAlerts): Router {
  const router = Router();

  router.get('/sites/:siteId/me/alerts', async (req, res) => {
    send<'AlertSettingResponse'>(res, 200, { data: await alerts.setting(req.manager!.accountId, req.params.siteId) });
  });

  router.put('/sites/:siteId/me/alerts', async (req, res) => {
    const { mode, waitMinutes } = req.body as Body<'AlertSetting'>;
    send<'AlertSettingResponse'>(res, 200, { data: await alerts.setSetting(actor(req), req.params.siteId, { mode, waitMinutes }) });
  });

  return router;
}
