import express, { Router, type Request, type Response } from 'express';
import { escapeHtml } from '../mail/templates';
import type { Unsubscribe, UnsubscribeSubject } from '../mail/unsubscribe';
import { send } from './context';

/** The confirm page and its answer: plain HTML with no script or style, and a form that may post only here. */
const PAGE_CSP = "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function page(res: Response, status: number, title: string, body: string) {
  res.status(status);
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res
    .type('html')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
        `<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`,
    );
}

/** What unsubscribing stops, by whose the emails are. */
const WHAT: Record<UnsubscribeSubject['kind'], string> = {
  member: 'emails of waiting visitors on this site (you can turn them on again in the dashboard settings)',
  visitor: 'emails of replies to your conversations on this site',
};

/**
 * One-click unsubscribe (openapi/manage.yaml, tag Email): public, the token is the credential. A GET
 * shows a button and never unsubscribes, since mail scanners fetch every link of an email.
 */
export function unsubscribeRoutes(unsubscribe: Unsubscribe): Router {
  const router = Router();

  router.get('/unsubscribe/:token', (req, res) => {
    // A changed or made-up token is the envelope's 404, like every refusal of this API.
    const subject = unsubscribe.verify(req.params.token);
    page(
      res,
      200,
      'Unsubscribe?',
      `<p>${escapeHtml(`Stop getting ${WHAT[subject.kind]}?`)}</p>` +
        `<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
    );
  });

  router.post('/unsubscribe/:token', async (req, res) => {
    const subject = await unsubscribe.apply(req.params.token);
    const message = `You will no longer get ${WHAT[subject.kind]}.`;
    if (req.accepts(['json', 'html']) === 'html') return page(res, 200, 'Unsubscribed', `<p>${escapeHtml(message)}</p>`);
    send<'UnsubscribedResponse'>(res, 200, { data: { unsubscribed: true, message } });
  });

  return router;
}

/** RFC 8058's body is a form: `List-Unsubscribe=One-Click`, a few bytes. */
export const unsubscribeBody = express.urlencoded({ extended: false, limit: 1024, parameterLimit: 5 });

/** Whether a request is for the one-click endpoint, whose token (not an ambient cookie) is its credential. */
export const isUnsubscribe = (req: Pick<Request, 'path'>) => req.path.startsWith('/unsubscribe/');
