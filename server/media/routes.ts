import { Router } from 'express';
import { pipeline } from 'node:stream';
import { safeFileName, type MediaService } from './service';
import { servedContentType } from './inert';
import type { operations } from '../../sdk/src/generated/api';

type MediaQuery = NonNullable<operations['downloadMedia']['parameters']['query']>;

/** RFC 6266 filename: an ASCII fallback plus the UTF-8 name, both quoted safely. */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * GET /media/{id}: with a key (media:read) or by signed link; streamed, never buffered, or with
 * MEDIA_DOWNLOAD=redirect answered by a redirect to the media store's short-lived presigned URL,
 * which serves the same inert type and disposition.
 */
export function mediaRoutes(service: MediaService): Router {
  const router = Router();

  router.get('/media/:id', async (req, res) => {
    const query = req.query as MediaQuery;
    if (!req.principal) service.verifyLink(req.params.id, query.expires, query.signature);
    const row = await service.open(req.principal ? req.principal.siteId : null, req.params.id);
    const etag = `"${row.sha256}"`;
    res.setHeader('ETag', etag);
    if (req.headers['if-none-match'] === etag) {
      res.status(304).end();
      return;
    }
    // Never a type a browser would run or render as a document (inert.ts), and never sniffed.
    // The name is cleaned again on the way out, whatever an older row holds (invisible characters, see safeFileName).
    const headers = { contentType: servedContentType(row.mime_type), contentDisposition: contentDisposition(safeFileName(row.name)) };
    const location = await service.redirectUrl(row, headers);
    if (location) {
      res.setHeader('Cache-Control', 'no-store');
      res.redirect(302, location);
      return;
    }
    const body = await service.read(row);
    res.setHeader('Content-Type', headers.contentType);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Length', String(row.size));
    res.setHeader('Content-Disposition', headers.contentDisposition);
    res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
    res.status(200);
    // pipeline, not pipe: a client that goes away mid-download must close the file too (pipe leaves
    // the read stream, and its descriptor, open forever). A read error cuts the answer short, which
    // the client sees against Content-Length; a client leaving early is no error of ours.
    pipeline(body, res, (err) => {
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') req.log.error({ err, media: row.id }, 'media read failed');
    });
  });

  return router;
}
