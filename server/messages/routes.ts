import { Router } from 'express';
import type { MessageService } from './service';
import type { operations } from '../../sdk/src/generated/api';
import type { IncomingFile } from '../media/service';

type ListQuery = NonNullable<operations['listMessages']['parameters']['query']>;
type ListAnswer = operations['listMessages']['responses'][200]['content']['application/json'];
type ReplyBody = operations['createReply']['requestBody']['content']['application/json'];
type ReplyAnswer = operations['createReply']['responses'][201]['content']['application/json'];

/** A reply body with the document's defaults filled in (the idempotency fingerprint compares these). */
export function normaliseReply(body: unknown) {
  const b = (body ?? {}) as Partial<ReplyBody>;
  return { ...b, content: b.content ?? '', format: b.format ?? 'plain' };
}

/** GET and POST /conversations/{id}/messages. */
export function messageRoutes(service: MessageService): Router {
  const router = Router();

  router.get('/conversations/:id/messages', async (req, res) => {
    const answer: ListAnswer = await service.list(req.principal!.siteId, req.params.id, req.query as ListQuery);
    res.json(answer);
  });

  router.post('/conversations/:id/messages', async (req, res) => {
    const body = req.body as Partial<ReplyBody>;
    const files: IncomingFile[] = (req.uploadedFiles ?? []).map((f) => ({
      tempPath: f.path,
      originalName: f.originalname,
      mimeType: f.mimetype,
    }));
    const principal = req.principal!;
    const idem = req.idempotency;
    const result = await service.reply(
      principal.siteId,
      req.params.id,
      { direction: 'outgoing', origin: 'api', apiKeyId: principal.keyId, content: body.content ?? '', format: body.format ?? 'plain', files },
      idem ? (trx, message) => idem.completeIn(trx, 201, { data: message } satisfies ReplyAnswer) : undefined,
    );
    const answer: ReplyAnswer = { data: result.message };
    res.status(201).json(answer);
  });

  return router;
}
