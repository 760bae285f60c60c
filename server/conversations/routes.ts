import { Router } from 'express';
import type { ConversationService, ListConversationsQuery } from './service';
import type { operations } from '../../sdk/src/generated/api';

type ConversationAnswer = operations['getConversation']['responses'][200]['content']['application/json'];
type ListAnswer = operations['listConversations']['responses'][200]['content']['application/json'];

/** GET /conversations, GET /conversations/{id}, POST /conversations/{id}/close. Rights are checked from the document. */
export function conversationRoutes(service: ConversationService): Router {
  const router = Router();

  router.get('/conversations', async (req, res) => {
    const answer: ListAnswer = await service.list(req.principal!.siteId, req.query as ListConversationsQuery);
    res.json(answer);
  });

  router.get('/conversations/:id', async (req, res) => {
    const answer: ConversationAnswer = { data: await service.get(req.principal!.siteId, req.params.id) };
    res.json(answer);
  });

  router.post('/conversations/:id/close', async (req, res) => {
    const answer: ConversationAnswer = { data: await service.close(req.principal!.siteId, req.params.id) };
    res.json(answer);
  });

  return router;
}
