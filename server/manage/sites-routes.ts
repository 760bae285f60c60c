import { Router } from 'express';
import type { SiteAdmin } from '../sites/service';
import { actor, Body, send } from './context';

/**
 * An owner's sites and access keys (openapi/manage.yaml, tags Sites and Keys): each a call into the
 * site admin service, which writes the audit entry; the entry has checked the role.
 */
export function siteAdminRoutes(sites: SiteAdmin): Router {
  const router = Router();

  router.post('/sites', async (req, res) => {
    const { name } = req.body as Body<'CreateSiteRequest'>;
    send<'ManagedSiteResponse'>(res, 201, { data: await sites.createSite(actor(req), name) });
  });

  router.get('/sites/:siteId', async (req, res) => {
    send<'ManagedSiteResponse'>(res, 200, { data: await sites.getSite(req.params.siteId) });
  });

  router.patch('/sites/:siteId', async (req, res) => {
    const change = req.body as Body<'UpdateSiteRequest'>;
    send<'UpdatedSiteResponse'>(res, 200, { data: await sites.updateSite(actor(req), req.params.siteId, change) });
  });

  router.get('/sites/:siteId/allowed-origins', async (req, res) => {
    send<'OriginList'>(res, 200, { data: await sites.listOrigins(req.params.siteId) });
  });

  router.put('/sites/:siteId/allowed-origins', async (req, res) => {
    const { origins } = req.body as Body<'ReplaceOriginsRequest'>;
    send<'OriginList'>(res, 200, { data: await sites.replaceOrigins(actor(req), req.params.siteId, origins) });
  });

  router.post('/sites/:siteId/allowed-origins', async (req, res) => {
    const { origin } = req.body as Body<'AddOriginRequest'>;
    send<'OriginList'>(res, 200, { data: await sites.addOrigin(actor(req), req.params.siteId, origin) });
  });

  router.delete('/sites/:siteId/allowed-origins', async (req, res) => {
    const { origin } = req.query as { origin: string };
    send<'OriginList'>(res, 200, { data: await sites.removeOrigin(actor(req), req.params.siteId, origin) });
  });

  router.post('/sites/:siteId/identity-secret/rotate', async (req, res) => {
    send<'RotatedIdentitySecretResponse'>(res, 200, { data: await sites.rotateIdentitySecret(actor(req), req.params.siteId) });
  });

  router.get('/sites/:siteId/embed', async (req, res) => {
    send<'EmbedSnippetResponse'>(res, 200, { data: await sites.embed(req.params.siteId) });
  });

  router.get('/sites/:siteId/visitor-files', async (req, res) => {
    send<'VisitorFilesResponse'>(res, 200, { data: await sites.visitorFiles(req.params.siteId) });
  });

  router.patch('/sites/:siteId/visitor-files', async (req, res) => {
    const change = req.body as Body<'UpdateVisitorFilesRequest'>;
    send<'VisitorFilesResponse'>(res, 200, { data: await sites.updateVisitorFiles(actor(req), req.params.siteId, change) });
  });

  router.post('/sites/:siteId/visitor-revocations', async (req, res) => {
    // The document admits exactly one of visitorId and all (true).
    const { visitorId } = req.body as Body<'RevokeVisitorsRequest'>;
    send<'VisitorRevocationResponse'>(res, 200, { data: await sites.revokeVisitors(actor(req), req.params.siteId, visitorId ?? null) });
  });

  router.get('/sites/:siteId/keys', async (req, res) => {
    const query = req.query as { limit?: number; cursor?: string };
    send<'ApiKeyList'>(res, 200, await sites.listKeys(req.params.siteId, query));
  });

  router.post('/sites/:siteId/keys', async (req, res) => {
    const { label, scopes } = req.body as Body<'CreateKeyRequest'>;
    send<'CreatedApiKeyResponse'>(res, 201, { data: await sites.createKey(actor(req), req.params.siteId, label, scopes) });
  });

  router.delete('/sites/:siteId/keys/:keyId', async (req, res) => {
    send<'ApiKeyResponse'>(res, 200, { data: await sites.revokeKey(actor(req), req.params.siteId, req.params.keyId) });
  });

  return router;
}
