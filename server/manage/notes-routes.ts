import { Router } from 'express';
import type { Services } from '../services';
import { idempotency } from '../http/idempotency';
import { actor, send, type Body } from './context';

type ListQuery = { limit?: number; cursor?: string; order?: 'asc' | 'desc' };

/** A note request with the document's default filled in, so `{content}` and `{content, format: 'plain'}` are the same request to Idempotency-Key. */
const normaliseNote = (body: unknown) => {
  const b = (body ?? {}) as Partial<Body<'CreateNoteRequest'>>;
  return { ...b, format: b.format ?? 'plain' };
};

/**
 * Internal notes of openapi/manage.yaml (`x-role: member`, checked by the entry): each a call into
 * the notes service, which holds the rules (who may edit or delete, mentions).
 */
export function noteRoutes(services: Services): Router {
  const notes = services.notes.service;
  const router = Router();
  const base = '/sites/:siteId/inbox/conversations/:conversationId/notes';
  const one = `${base}/:noteId`;

  router.get(base, async (req, res) => {
    send<'NoteList'>(res, 200, await notes.list(req.params.siteId, req.params.conversationId, req.query as ListQuery));
  });

  // Idempotency-Key: scoped to the account, as on the inbox's reply; a replay is not a timeline entry (it names no message).
  router.post(
    base,
    idempotency(
      services.idempotency,
      normaliseNote,
      (req) => req.manager?.accountId,
      () => undefined,
    ),
    async (req, res) => {
      const body = req.body as Body<'CreateNoteRequest'>;
      const idem = req.idempotency;
      const note = await notes.create(
        actor(req),
        String(req.params.siteId),
        String(req.params.conversationId),
        { content: body.content, format: body.format ?? 'plain' },
        idem ? (trx, n) => idem.completeIn(trx, 201, { data: n } satisfies Body<'NoteResponse'>) : undefined,
      );
      send<'NoteResponse'>(res, 201, { data: note });
    },
  );

  router.patch(one, async (req, res) => {
    const body = req.body as Body<'UpdateNoteRequest'>;
    send<'NoteResponse'>(res, 200, { data: await notes.update(actor(req), req.params.siteId, req.params.conversationId, req.params.noteId, body) });
  });

  router.delete(one, async (req, res) => {
    await notes.remove(actor(req), req.membership!.role, req.params.siteId, req.params.conversationId, req.params.noteId);
    res.status(204).end();
  });

  return router;
}
