import { Router } from 'express';
import type { Tags } from '../tags/service';
import { actor, Body, send } from './context';

/** A site's tags and the tags on its conversations (openapi/manage.yaml, tag Tags): each a call into the tags service; the entry has checked the role. */
export function tagRoutes(tags: Tags): Router {
  const router = Router();
  const onConversation = '/sites/:siteId/inbox/conversations/:conversationId/tags/:tagId';

  router.get('/sites/:siteId/tags', async (req, res) => {
    send<'TagList'>(res, 200, { data: await tags.list(req.params.siteId) });
  });

  router.post('/sites/:siteId/tags', async (req, res) => {
    const { name } = req.body as Body<'TagRequest'>;
    send<'TagResponse'>(res, 201, { data: await tags.create(actor(req), req.params.siteId, { name }) });
  });

  router.patch('/sites/:siteId/tags/:tagId', async (req, res) => {
    const { name } = req.body as Body<'TagRequest'>;
    send<'TagResponse'>(res, 200, { data: await tags.rename(actor(req), req.params.siteId, req.params.tagId, { name }) });
  });

  router.delete('/sites/:siteId/tags/:tagId', async (req, res) => {
    await tags.remove(actor(req), req.params.siteId, req.params.tagId);
    res.status(204).end();
  });

  router.put(onConversation, async (req, res) => {
    const { siteId, conversationId, tagId } = req.params;
    send<'ConversationTagList'>(res, 200, { data: await tags.apply(actor(req), siteId, conversationId, tagId) });
  });

  router.delete(onConversation, async (req, res) => {
    const { siteId, conversationId, tagId } = req.params;
    send<'ConversationTagList'>(res, 200, { data: await tags.unapply(actor(req), siteId, conversationId, tagId) });
  });

  return router;
}
