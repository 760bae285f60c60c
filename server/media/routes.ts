import { Router } from 'express';
import fs from 'node:fs';
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

/** GET /media/{id}: with a key (media:read) or by signed link; streamed, never buffered. */
export function mediaRoutes(service: MediaService): Router {
  const router = Router();

  router.get('/media/:id', async (req, res) => {
    const query = req.query as MediaQuery;
    if (!req.principal) service.verifyLink(req.params.id, query.expires, query.signature);
    const { row, file } = await service.open(req.principal ? req.principal.siteId : null, req.params.id);
    const etag = `"${row.sha256}"`;
    res.setHeader('ETag', etag);
    if (req.headers['if-none-match'] === etag) {
      res.status(304).end();
      return;
    }
    // Never a type a browser would run or render as a document (inert.ts), and never sniffed.
    res.setHeader('Content-Type', servedContentType(row.mime_type));
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Length', String(row.size));
    // Cleaned again on the way out, whatever an older row holds (invisible characters, see safeFileName).
    res.setHeader('Content-Disposition', contentDisposition(safeFileName(row.name)));
    res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
    res.status(200);
    // pipeline, not pipe: a client that goes away mid-download must close the file too (pipe leaves
    // the read stream, and its descriptor, open forever). A read error cuts the answer short, which
    // the client sees against Content-Length; a client leaving early is no error of ours.
    pipeline(fs.createReadStream(file), res, (err) => {
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') req.log.error({ err, media: row.id }, 'media read failed');
    });
  });

  return router;
}
