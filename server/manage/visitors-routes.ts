import { Router } from 'express';
import type { Services } from '../services';
import { actor, Body, send } from './context';
import type { HoursChange } from '../sites/business-hours';

/**
 * The visitor in context on the management API (openapi/manage.yaml): the inbox's side panel
 * (members), the site's page-tracking setting and deleting a visitor's data (owners). The entry
 * has checked the role; the rules are the visitors' services'.
 */
export function visitorRoutes(services: Services): Router {
  const { context, deletion, replyEmails } = services.visitors;
  const router = Router();

  router.get('/sites/:siteId/inbox/conversations/:conversationId/visitor', async (req, res) => {
    send<'InboxVisitorResponse'>(res, 200, { data: await context.panel(req.params.siteId, req.params.conversationId) });
  });

  router.get('/sites/:siteId/visitor-context', async (req, res) => {
    send<'VisitorContextSettingsResponse'>(res, 200, { data: await context.settings(req.params.siteId) });
  });

  router.patch('/sites/:siteId/visitor-context', async (req, res) => {
    const change = req.body as Body<'UpdateVisitorContextSettingsRequest'>;
    send<'VisitorContextSettingsResponse'>(res, 200, { data: await context.updateSettings(actor(req), req.params.siteId, change) });
  });

  router.get('/sites/:siteId/business-hours', async (req, res) => {
    send<'BusinessHoursResponse'>(res, 200, { data: await replyEmails.hours(req.params.siteId) });
  });

  router.put('/sites/:siteId/business-hours', async (req, res) => {
    const hours = req.body as Body<'BusinessHours'>;
    send<'BusinessHoursResponse'>(res, 200, { data: await replyEmails.updateHours(actor(req), req.params.siteId, hours as HoursChange) });
  });

  router.post('/sites/:siteId/visitor-deletions', async (req, res) => {
    const { visitorId } = req.body as Body<'DeleteVisitorDataRequest'>;
    const result = await deletion.deleteVisitor(actor(req), req.params.siteId, visitorId);
    send<'VisitorDeletionResponse'>(res, 200, { data: result as Body<'VisitorDeletionResponse'>['data'] });
  });

  return router;
}
