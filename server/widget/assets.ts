import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { limitByAddress } from '../http/rate-limit/answers';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';
import { buildWindowAssets, WindowAssets } from '../../scripts/build-window';

/**
 * The chat window's browser side, under /window/v1 next to its entry:
 *
 * - `loader.js`: what sites embed. Its URL has no version (it is in customers' pages), so it is
 *   cached for 5 minutes only: a new release reaches every site within that.
 * - `assets/<version>/panel.js|panel.css`: the panel's code, versioned by content hash and cached
 *   for a year (immutable). An unknown version is 404, never another build's file.
 * - `sites/<siteId>/panel`: the panel document framed by the loader. No inline script or style;
 *   its CSP allows only this origin, and `frame-ancestors` only the site's allowed origins, which
 *   is what lets the gateway trust the origin the panel reports (see routes.ts).
 *
 * The code is built in memory once per process (esbuild, in well under a second) when the routes
 * are made, so a server start never serves a stale build and no generated file is committed.
 */
let building: Promise<WindowAssets> | undefined;
export function windowAssets(): Promise<WindowAssets> {
  building ??= buildWindowAssets();
  return building;
}

const SITE_ID = /^ws_[0-9a-hjkmnp-tv-z]{26}$/;
const ORIGIN = /^https?:\/\/[A-Za-z0-9.[\]:-]+$/;
const LOADER_MAX_AGE_SECONDS = 300;

export function panelCsp(allowedOrigins: string[]): string {
  // Origins come validated from the site's settings; filtered again since they land in a header.
  const ancestors = allowedOrigins.filter((o) => ORIGIN.test(o));
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestors.length ? ancestors.join(' ') : "'none'"}`,
  ].join('; ');
}

function panelHtml(siteId: string, version: string): string {
  const assets = `/window/v1/assets/${version}`;
  // siteId matched SITE_ID and version is hex: nothing here needs escaping.
  return `<!doctype html>
<html lang="en" data-site="${siteId}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat</title>
<link rel="stylesheet" href="${assets}/panel.css">
<script src="${assets}/panel.js" defer></script>
</head>
<body>
<div class="panel" role="dialog" aria-labelledby="cw-title">
<header><h1 id="cw-title">Chat</h1><button type="button" id="cw-close" class="close" aria-label="Close chat">&times;</button></header>
<div id="cw-log" class="log" role="log" aria-live="polite" aria-label="Messages" tabindex="0"></div>
<p id="cw-status" class="status" role="status"></p>
<form id="cw-form" aria-label="Write a message">
<ul id="cw-chosen" class="chosen" aria-label="Files to send" hidden></ul>
<div class="row">
<button type="button" id="cw-attach" class="attach" aria-label="Attach files"><span aria-hidden="true">+</span></button>
<input type="file" id="cw-file" multiple hidden tabindex="-1">
<label for="cw-input" class="sr-only">Message</label>
<textarea id="cw-input" rows="1" maxlength="10000" placeholder="Write a message…" autocomplete="off"></textarea>
<button type="submit" class="send">Send</button>
</div>
</form>
</div>
</body>
</html>
`;
}

export function windowAssetRoutes(opts: { services: Services; limiter: RateLimiter; logger: Logger }): Router {
  const router = Router();
  // Built now, at start; a failure is logged and answered 503 until a restart.
  windowAssets().catch((err) => opts.logger.error({ err: { message: (err as Error).message } }, 'building the chat window failed'));

  const ready = async (): Promise<WindowAssets> => {
    try {
      return await windowAssets();
    } catch {
      throw new ApiError('service_unavailable', 'The chat window is not available on this instance.', undefined, { 'Retry-After': '60' });
    }
  };
  const script = (res: Response, body: Buffer, cache: string) => {
    res.setHeader('Cache-Control', cache);
    // Loaded by other sites' pages as a script: say so, or a CORP-strict browser refuses it.
    res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
    res.type('application/javascript; charset=utf-8').send(body);
  };

  router.get('/loader.js', async (_req, res) => {
    script(res, (await ready()).loaderJs, `public, max-age=${LOADER_MAX_AGE_SECONDS}`);
  });

  router.get('/assets/:version/:file', async (req, res) => {
    const a = await ready();
    const immutable = 'public, max-age=31536000, immutable';
    if (req.params.version === a.version && req.params.file === 'panel.js') return script(res, a.panelJs, immutable);
    if (req.params.version === a.version && req.params.file === 'panel.css') {
      res.setHeader('Cache-Control', immutable);
      return res.type('text/css; charset=utf-8').send(a.panelCss);
    }
    throw new ApiError('not_found', 'No such chat window asset (an older version is not kept: reload the page).');
  });

  router.get('/sites/:siteId/panel', async (req: Request, res: Response) => {
    await limitByAddress(opts.limiter, req, 'window-');
    const siteId = req.params.siteId as string;
    if (!SITE_ID.test(siteId)) throw new ApiError('not_found', 'No such site.');
    const [a, origins] = await Promise.all([ready(), opts.services.access.allowedOrigins(siteId)]);
    res.setHeader('Content-Security-Policy', panelCsp(origins));
    // frame-ancestors decides who may frame it; X-Frame-Options DENY (set for everything else) would forbid all.
    res.removeHeader('X-Frame-Options');
    // The origins can change at any time: the document is always fetched anew (it is small).
    res.setHeader('Cache-Control', 'no-cache');
    res.type('html').send(panelHtml(siteId, a.version));
  });

  return router;
}
