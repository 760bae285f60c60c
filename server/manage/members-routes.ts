import { Router } from 'express';
import type { Members } from '../accounts/members';
import type { AuditLog } from '../accounts/audit';
import { actor, Body, send, signedIn } from './context';

/** The account's sites, a site's members and roles, and its audit log (openapi/manage.yaml, tags Sites, Members, Audit). */
export function memberRoutes({ members, audit }: { members: Members; audit: AuditLog }): Router {
  const router = Router();

  router.get('/sites', async (req, res) => {
    send<'SiteList'>(res, 200, { data: await members.mySites(signedIn(req)) });
  });

  router.get('/sites/:siteId/members', async (req, res) => {
    send<'MemberList'>(res, 200, { data: await members.list(req.params.siteId) });
  });

  router.patch('/sites/:siteId/members/:accountId', async (req, res) => {
    const { role } = req.body as Body<'ChangeRoleRequest'>;
    send<'MemberResponse'>(res, 200, { data: await members.changeRole(actor(req), req.params.siteId, req.params.accountId, role) });
  });

  router.delete('/sites/:siteId/members/:accountId', async (req, res) => {
    await members.remove(actor(req), req.params.siteId, req.params.accountId);
    res.status(204).end();
  });

  router.delete('/sites/:siteId/members/:accountId/sessions', async (req, res) => {
    send<'EndedSessionsResponse'>(res, 200, { data: await members.endSessions(actor(req), req.params.siteId, req.params.accountId) });
  });

  router.get('/sites/:siteId/audit-log', async (req, res) => {
    send<'AuditList'>(res, 200, await audit.page(req.params.siteId, req.query as { limit?: number; cursor?: string }));
  });

  return router;
}
