import { Router } from 'express';
import type { SharedReplies } from '../replies/service';
import type { SiteAdmin } from '../sites/service';
import type { Profile } from '../accounts/profile';
import type { SignIn } from '../accounts/sign-in';
import { actor, Body, send, signedIn } from './context';

/**
 * A site's shared replies (openapi/manage.yaml, tag Replies), the site's agent-names setting, and
 * the account's own display name: each a call into its service; the entry has checked the role.
 */
export function replyRoutes(deps: { replies: SharedReplies; siteAdmin: SiteAdmin; profile: Profile; signIn: SignIn }): Router {
  const { replies } = deps;
  const router = Router();

  router.patch('/me', async (req, res) => {
    const { displayName } = req.body as Body<'UpdateMeRequest'>;
    await deps.profile.setDisplayName(signedIn(req), displayName);
    send<'MeResponse'>(res, 200, { data: await deps.signIn.me(signedIn(req)) });
  });

  router.get('/sites/:siteId/shared-replies', async (req, res) => {
    send<'SharedReplyList'>(res, 200, { data: await replies.list(req.params.siteId) });
  });

  router.post('/sites/:siteId/shared-replies', async (req, res) => {
    const { title, body } = req.body as Body<'CreateSharedReplyRequest'>;
    send<'SharedReplyResponse'>(res, 201, { data: await replies.create(actor(req), req.params.siteId, { title, body }) });
  });

  router.post('/sites/:siteId/shared-reply-imports', async (req, res) => {
    const { replies: list } = req.body as Body<'ImportSharedRepliesRequest'>;
    send<'ImportSharedRepliesResponse'>(res, 200, { data: await replies.import(actor(req), req.params.siteId, list) });
  });

  router.patch('/sites/:siteId/shared-replies/:replyId', async (req, res) => {
    const change = req.body as Body<'UpdateSharedReplyRequest'>;
    send<'SharedReplyResponse'>(res, 200, { data: await replies.update(actor(req), req.params.siteId, req.params.replyId, change) });
  });

  router.delete('/sites/:siteId/shared-replies/:replyId', async (req, res) => {
    await replies.remove(actor(req), req.params.siteId, req.params.replyId);
    res.status(204).end();
  });

  router.get('/sites/:siteId/inbox/conversations/:conversationId/shared-replies', async (req, res) => {
    send<'FilledSharedReplyList'>(res, 200, { data: await replies.filledFor(signedIn(req), req.params.siteId, req.params.conversationId) });
  });

  router.get('/sites/:siteId/agent-names', async (req, res) => {
    send<'AgentNamesResponse'>(res, 200, { data: await deps.siteAdmin.agentNames(req.params.siteId) });
  });

  router.put('/sites/:siteId/agent-names', async (req, res) => {
    const { shown } = req.body as Body<'AgentNamesSetting'>;
    send<'AgentNamesResponse'>(res, 200, { data: await deps.siteAdmin.setAgentNames(actor(req), req.params.siteId, shown) });
  });

  return router;
}
