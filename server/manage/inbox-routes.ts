import { Request, RequestHandler, Router } from 'express';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import type { components, operations } from './generated/api';
import type { InboxQuery } from '../inbox/service';
import { multipartBody } from '../http/bodies';
import { idempotency, inboxReplayScope } from '../http/idempotency';
import { normaliseReply } from '../messages/routes';
import { manageDocument } from '../http/openapi-document';
import { documentedRole, resolveMembership } from './roles';

type Schemas = components['schemas'];
type ReplyBody = Schemas['InboxReplyRequest'];
type ListAnswer = operations['listInboxConversations']['responses'][200]['content']['application/json'];
type ConversationAnswer = operations['getInboxConversation']['responses'][200]['content']['application/json'];
type MessagesAnswer = operations['listInboxMessages']['responses'][200]['content']['application/json'];
type ReplyAnswer = operations['replyFromInbox']['responses'][201]['content']['application/json'];
type ReadAnswer = operations['markInboxConversationRead']['responses'][200]['content']['application/json'];

const REPLY_PATH = '/sites/:siteId/inbox/conversations/:conversationId/messages';
const actor = (req: Request) => ({ manager: req.manager!, clientIp: req.ip ?? null });

/**
 * Ahead of the entry's validator: a multipart reply is refused (the operation's role on the site,
 * then 404 conversation) before a byte is spooled, then spooled like the public API's reply. The
 * membership resolved here is the one the role step finds on the request.
 */
export function inboxUploads(services: Services): RequestHandler {
  const role = documentedRole(manageDocument() as never, 'post', '/sites/{siteId}/inbox/conversations/{conversationId}/messages');
  if (role !== 'member' && role !== 'owner') throw new Error(`replyFromInbox is a site operation, not ${role}`);
  const router = Router();
  router.post(
    REPLY_PATH,
    async (req, _res, next) => {
      try {
        if (req.is('multipart/form-data') && req.manager) {
          await resolveMembership(services.accounts.members, req, role, String(req.params.siteId));
          await services.inbox.service.checkReply(String(req.params.siteId), String(req.params.conversationId));
        }
        next();
      } catch (err) {
        next(err);
      }
    },
    multipartBody(services.config.dataDir, services.config.maxAttachmentBytes),
  );
  return router;
}

/** The inbox's operations of openapi/manage.yaml (`x-role: member`, checked by the entry): each a call into the inbox service. */
export function inboxRoutes(services: Services, logger: Logger): Router {
  const inbox = services.inbox.service;
  const router = Router();
  const base = '/sites/:siteId/inbox/conversations';
  const one = `${base}/:conversationId`;

  router.get(base, async (req, res) => {
    const answer: ListAnswer = await inbox.list(req.manager!, req.params.siteId, req.query as InboxQuery);
    res.json(answer);
  });

  router.get(one, async (req, res) => {
    const answer: ConversationAnswer = { data: await inbox.get(req.manager!, req.params.siteId, req.params.conversationId) };
    res.json(answer);
  });

  router.get(`${one}/messages`, async (req, res) => {
    const answer: MessagesAnswer = await inbox.messages(
      req.params.siteId,
      req.params.conversationId,
      req.query as { limit?: number; cursor?: string; order?: 'asc' | 'desc' },
    );
    res.json(answer);
  });

  // Idempotency-Key: the public reply's records, scoped to the account instead of an API key.
  router.post(
    REPLY_PATH,
    idempotency(services.idempotency, normaliseReply, (req) => req.manager?.accountId, inboxReplayScope),
    async (req, res) => {
      const body = req.body as Partial<ReplyBody>;
      const files = (req.uploadedFiles ?? []).map((f) => ({ tempPath: f.path, originalName: f.originalname, mimeType: f.mimetype }));
      const idem = req.idempotency;
      const message = await inbox.reply(
        actor(req),
        String(req.params.siteId),
        String(req.params.conversationId),
        { content: body.content ?? '', format: body.format ?? 'plain', files },
        idem ? (trx, m) => idem.completeIn(trx, 201, { data: m } satisfies ReplyAnswer) : undefined,
      );
      const answer: ReplyAnswer = { data: message };
      res.status(201).json(answer);
    },
  );

  router.post(`${one}/close`, async (req, res) => {
    const answer: ConversationAnswer = { data: await inbox.close(actor(req), req.params.siteId, req.params.conversationId) };
    res.json(answer);
  });

  router.post(`${one}/assignee`, async (req, res) => {
    const { assigneeId } = req.body as Schemas['AssignRequest'];
    const answer: ConversationAnswer = { data: await inbox.assign(actor(req), req.params.siteId, req.params.conversationId, assigneeId, req.membership!.role) };
    res.json(answer);
  });

  router.post(`${one}/read`, async (req, res) => {
    const answer: ReadAnswer = { data: await inbox.markRead(req.manager!, req.params.siteId, req.params.conversationId) };
    res.json(answer);
  });

  router.get('/sites/:siteId/inbox/events', async (req, res) => {
    const given = req.headers['last-event-id'];
    const source = await inbox.stream(req.manager!, req.params.siteId, typeof given === 'string' && given !== '' ? given : undefined, logger);
    await services.inbox.streams.openSource(req, res, source);
  });

  return router;
}
