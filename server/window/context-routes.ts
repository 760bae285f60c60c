import { Router } from 'express';
import type { Services } from '../services';
import type { components } from './generated/api';
import type { ContextReport, VisitorDetails } from '../visitors/context';

type Schemas = components['schemas'];

/**
 * The visitor's context on the window's entry (openapi/window.yaml, tag Conversation): the site's
 * page-tracking setting, the window's reports of where its visitor is, and what the page says of
 * its visitor. The entry has checked the window token (req.windowVisitor) and the body by then;
 * the rules are the visitors' context service's.
 */
export function windowContextRoutes(services: Services): Router {
  const context = services.visitors.context;
  const router = Router();

  router.get('/sites/:siteId/context', async (req, res) => {
    const answer: Schemas['ContextSettingsResponse'] = { data: await context.settings(req.windowVisitor!.siteId) };
    res.json(answer);
  });

  router.post('/sites/:siteId/context', async (req, res) => {
    const v = req.windowVisitor!;
    // The user agent is the browser's own header, never a field the page could fill in.
    const data = await context.report(v.siteId, v.visitorId, v.origin, req.body as ContextReport, req.headers['user-agent']);
    const answer: Schemas['ContextReportResponse'] = { data };
    res.json(answer);
  });

  router.post('/sites/:siteId/visitor', async (req, res) => {
    const v = req.windowVisitor!;
    const answer: Schemas['VisitorDetailsResponse'] = { data: await context.updateDetails(v.siteId, v.visitorId, req.body as VisitorDetails) };
    res.json(answer);
  });

  // The away state and form (docs/window.md, Away): computed here from the site's hours and presence.
  router.get('/sites/:siteId/availability', async (req, res) => {
    const v = req.windowVisitor!;
    const answer: Schemas['AvailabilityResponse'] = { data: await services.visitors.replyEmails.availability(v.siteId, v.visitorId) };
    res.json(answer);
  });

  router.post('/sites/:siteId/reply-email', async (req, res) => {
    const v = req.windowVisitor!;
    const body = req.body as Schemas['ReplyEmailRequest'];
    const answer: Schemas['ReplyEmailResponse'] = { data: await services.visitors.replyEmails.leaveEmail(v.siteId, v.visitorId, body) };
    res.json(answer);
  });

  return router;
}
