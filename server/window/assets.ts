import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { Asset, AssetManifest, builtAssetDir, IMMUTABLE, loadAssetDir, loadAtStart, sendAsset } from '../http/static-assets';
import { limitByClientIp } from '../http/rate-limit/answers';
import type { RateLimiter } from '../http/rate-limit/limiter';
import type { Services } from '../services';
import type { Logger } from '../platform/logger';

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
 * The files come from the build (`npm run build`, scripts/build-window.ts): minified, with brotli
 * and gzip variants made at build time. They are read once when the routes are made; nothing is
 * compiled or compressed while serving.
 */

/** `manifest.json` of the build's window/ directory: what scripts/build-window.ts wrote. */
export interface WindowManifest extends AssetManifest {
  /** Content hash of the panel's files: their URLs carry it. */
  version: string;
}

export interface WindowAssets {
  version: string;
  files: ReadonlyMap<string, Asset>;
}

/** The window/ directory of the build this code runs from (see builtAssetDir). */
export const windowAssetDir = (): string => builtAssetDir('window');

/** Reads the build's files into memory (about 30 KB with their variants). */
export function loadWindowAssets(dir = windowAssetDir()): WindowAssets {
  const { manifest, files } = loadAssetDir<WindowManifest>(dir);
  return { version: manifest.version, files };
}

let loaded: WindowAssets | undefined;
/** This process's window files, read on first use. */
export function windowAssets(): WindowAssets {
  loaded ??= loadWindowAssets();
  return loaded;
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
<section id="cw-away" class="away" aria-labelledby="cw-away-title" hidden>
<p id="cw-away-title" class="away-title"></p>
<p id="cw-away-message"></p>
<form id="cw-away-form" novalidate>
<label for="cw-away-email">Your email</label>
<input type="email" id="cw-away-email" autocomplete="email" maxlength="254" required>
<label class="consent"><input type="checkbox" id="cw-away-consent"> Email me the replies I miss here (one click unsubscribes)</label>
<button type="submit">Notify me</button>
</form>
<p id="cw-away-status" role="status"></p>
</section>
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
  const ready = loadAtStart(windowAssets, opts.logger, 'chat window');

  router.get('/loader.js', (req, res) => {
    // Loaded by other sites' pages as a script: cross-origin, or a CORP-strict browser refuses it.
    sendAsset(req, res, ready().files.get('loader.js')!, `public, max-age=${LOADER_MAX_AGE_SECONDS}`, true);
  });

  router.get('/assets/:version/:file', (req, res) => {
    const a = ready();
    const asset = req.params.version === a.version && req.params.file !== 'loader.js' ? a.files.get(req.params.file as string) : undefined;
    if (!asset) throw new ApiError('not_found', 'No such chat window asset (an older version is not kept: reload the page).');
    sendAsset(req, res, asset, IMMUTABLE, true);
  });

  router.get('/sites/:siteId/panel', async (req: Request, res: Response) => {
    await limitByClientIp(opts.limiter, req, 'window-');
    const siteId = req.params.siteId as string;
    if (!SITE_ID.test(siteId)) throw new ApiError('not_found', 'No such site.');
    const a = ready();
    const origins = await opts.services.access.allowedOrigins(siteId);
    res.setHeader('Content-Security-Policy', panelCsp(origins));
    // frame-ancestors decides who may frame it; X-Frame-Options DENY (set for everything else) would forbid all.
    res.removeHeader('X-Frame-Options');
    // The origins can change at any time: the document is always fetched anew (it is small).
    res.setHeader('Cache-Control', 'no-cache');
    res.type('html').send(panelHtml(siteId, a.version));
  });

  return router;
}
