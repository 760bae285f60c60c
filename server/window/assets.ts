import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { fromProjectRoot } from '../platform/project-root';
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

export type ContentCoding = 'br' | 'gzip';

/** `manifest.json` of the build's window/ directory: what scripts/build-window.ts wrote. */
export interface WindowManifest {
  /** Content hash of the panel's files: their URLs carry it. */
  version: string;
  /** Each served file by name: its media type and the file of each variant (identity and precompressed). */
  files: Record<string, { type: string; variants: { identity: string } & Partial<Record<ContentCoding, string>> }>;
}

interface Variant {
  body: Buffer;
  etag: string;
}
interface Asset {
  type: string;
  identity: Variant;
  coded: Partial<Record<ContentCoding, Variant>>;
}
export interface WindowAssets {
  version: string;
  files: ReadonlyMap<string, Asset>;
}

/**
 * The window/ directory of the build this code runs from: beside its server/ directory when
 * compiled (a build in .dist/<id>, reached through dist/), else (run from the sources by tsx: the
 * tests, `npm run demo`) the current build's, dist/window.
 */
export function windowAssetDir(): string {
  const ownBuild = path.resolve(__dirname, '..', '..');
  return fs.existsSync(path.join(ownBuild, 'build.json')) ? path.join(ownBuild, 'window') : fromProjectRoot('dist', 'window');
}

function variant(body: Buffer): Variant {
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/**
 * Reads the build's files into memory (about 30 KB with their variants). The directory is
 * resolved first, so a build switched in meanwhile (dist/ is a symlink) cannot mix two builds.
 */
export function loadWindowAssets(dir = windowAssetDir()): WindowAssets {
  const real = fs.realpathSync(dir);
  const manifest = JSON.parse(fs.readFileSync(path.join(real, 'manifest.json'), 'utf8')) as WindowManifest;
  const files = new Map<string, Asset>();
  const read = (file: string) => {
    if (path.basename(file) !== file) throw new Error(`the window manifest names a file outside its directory: ${file}`);
    return variant(fs.readFileSync(path.join(real, file)));
  };
  for (const [name, f] of Object.entries(manifest.files)) {
    const { identity, ...coded } = f.variants;
    files.set(name, { type: f.type, identity: read(identity), coded: Object.fromEntries(Object.entries(coded).map(([c, file]) => [c, read(file)])) });
  }
  return { version: manifest.version, files };
}

let loaded: WindowAssets | undefined;
/** This process's window files, read on first use. */
export function windowAssets(): WindowAssets {
  loaded ??= loadWindowAssets();
  return loaded;
}

const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;
/** Preference on equal weights: the smaller variant first. */
const BY_SIZE = ['br', 'gzip', 'identity'] as const;

/**
 * The coding to answer with for an Accept-Encoding header (RFC 9110, 12.5.3): the highest weight
 * among the variants there are, `*` standing for codings not named, q=0 refusing one. Identity
 * not named counts only through `*`; it is still sent when nothing else is acceptable.
 */
export function chooseCoding(header: string | undefined, available: readonly ContentCoding[]): ContentCoding | 'identity' {
  if (!header) return 'identity';
  const weights = new Map<string, number>();
  for (const member of header.split(',')) {
    const [token, ...params] = member.split(';');
    const name = token.trim().toLowerCase();
    if (!name) continue;
    let q = 1;
    const weight = params.map((p) => /^\s*q\s*=\s*(\S*)\s*$/i.exec(p)).find(Boolean);
    if (weight) {
      if (!QVALUE.test(weight[1])) continue; // a malformed weight: the member is ignored
      q = Number(weight[1]);
    }
    weights.set(name === 'x-gzip' ? 'gzip' : name, q);
  }
  const any = weights.get('*');
  let best: ContentCoding | 'identity' = 'identity';
  let bestWeight = 0;
  for (const coding of BY_SIZE) {
    if (coding !== 'identity' && !available.includes(coding)) continue;
    const w = weights.get(coding) ?? any ?? 0;
    if (w > bestWeight) [best, bestWeight] = [coding, w];
  }
  return best;
}

/** If-None-Match names this ETag (weak comparison, RFC 9110 13.1.2), or is `*`. */
function notModified(req: Request, etag: string): boolean {
  const header = req.headers['if-none-match'];
  if (!header) return false;
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}

/** Sends one of the build's files in the best coding the client accepts. */
function sendAsset(req: Request, res: Response, asset: Asset, cacheControl: string): void {
  const coding = chooseCoding(req.headers['accept-encoding'], Object.keys(asset.coded) as ContentCoding[]);
  const chosen = coding === 'identity' ? asset.identity : asset.coded[coding]!;
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('Cache-Control', cacheControl);
  res.setHeader('ETag', chosen.etag);
  // Loaded by other sites' pages as a script: say so, or a CORP-strict browser refuses it.
  res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
  if (notModified(req, chosen.etag)) {
    res.status(304).end();
    return;
  }
  res.setHeader('Content-Type', asset.type);
  if (coding !== 'identity') res.setHeader('Content-Encoding', coding);
  res.setHeader('Content-Length', String(chosen.body.length));
  res.status(200).end(chosen.body);
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
  // Read now, at start; a missing or broken build is logged and answered 503 until a restart.
  let assets: WindowAssets | undefined;
  try {
    assets = windowAssets();
  } catch (err) {
    opts.logger.error({ err: { message: (err as Error).message } }, "the chat window's files are missing from the build: run npm run build");
  }
  const ready = (): WindowAssets => {
    if (!assets) throw new ApiError('service_unavailable', 'The chat window is not available on this instance.', undefined, { 'Retry-After': '60' });
    return assets;
  };

  router.get('/loader.js', (req, res) => {
    sendAsset(req, res, ready().files.get('loader.js')!, `public, max-age=${LOADER_MAX_AGE_SECONDS}`);
  });

  router.get('/assets/:version/:file', (req, res) => {
    const a = ready();
    const asset = req.params.version === a.version && req.params.file !== 'loader.js' ? a.files.get(req.params.file as string) : undefined;
    if (!asset) throw new ApiError('not_found', 'No such chat window asset (an older version is not kept: reload the page).');
    sendAsset(req, res, asset, 'public, max-age=31536000, immutable');
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
