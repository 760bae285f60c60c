import { Request, Response, Router } from 'express';
import { ApiError } from '../platform/errors';
import { Asset, AssetManifest, builtAssetDir, IMMUTABLE, loadAssetDir, loadAtStart, sendAsset } from '../http/static-assets';
import type { Logger } from '../platform/logger';
import { DASHBOARD_BASE_PATH, shellHtml } from './shell';

/**
 * The dashboard's browser side under /dashboard (docs/dashboard.md). It is static code that talks
 * to /manage/v1 only:
 *
 * - `assets/<hash>.js|css`: the build's files (scripts/build-dashboard.ts: the script's modules
 *   and the stylesheet), named by content hash and cached for a year (immutable). Any other name is 404 in the envelope.
 * - every other GET: the HTML shell, whatever the path, so the browser code routes by the history
 *   API (`/dashboard/sites/<siteId>/keys` reloaded opens that page). It holds no inline script or
 *   style, and its CSP allows this origin only (no `style` attributes either, no eval).
 */

export { DASHBOARD_BASE_PATH };

/** Bytes of one file as sent, in each coding: brotli (what browsers are sent) and gzip (the budget's measure). */
export interface SentSize {
  br: number;
  gzip: number;
}

/** The first load as the build measured it: the shell, its scripts (the entry and the inbox's modules), its stylesheet, and their sum. */
export interface FirstLoadSizes {
  html: SentSize;
  script: SentSize;
  style: SentSize;
  total: SentSize;
}

/**
 * `manifest.json` of the build's dashboard/ directory: the files, which the shell loads (the entry
 * module, the modules it preloads, the stylesheet), and the first load's size as measured when they
 * were built (scripts/build-dashboard.ts).
 */
export interface DashboardManifest extends AssetManifest {
  script: string;
  preload: string[];
  style: string;
  firstLoad: FirstLoadSizes;
}

export interface DashboardAssets {
  manifest: DashboardManifest;
  files: ReadonlyMap<string, Asset>;
}

export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Reads the build's dashboard/ directory (about 100 KB with its variants). */
export const loadDashboardAssets = (dir = builtAssetDir('dashboard')): DashboardAssets => loadAssetDir<DashboardManifest>(dir);

export function dashboardRoutes(opts: { logger: Logger }): Router {
  const router = Router();
  // The shell is made once with the files: it only names them.
  const ready = loadAtStart(
    () => {
      const assets = loadDashboardAssets();
      return { ...assets, shell: shellHtml(assets.manifest) };
    },
    opts.logger,
    'dashboard',
  );

  router.get('/assets/:file', (req: Request, res: Response) => {
    const asset = ready().files.get(req.params.file as string);
    if (!asset) throw new ApiError('not_found', 'No such dashboard asset (an older build is not kept: reload the page).');
    sendAsset(req, res, asset, IMMUTABLE);
  });

  router.get('/assets/{*rest}', () => {
    throw new ApiError('not_found', 'No such dashboard asset.');
  });

  router.get('/{*route}', (_req: Request, res: Response) => {
    const { shell } = ready();
    res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
    // It names the current build's files: always revalidated, so a new build is picked up at once.
    res.setHeader('Cache-Control', 'no-cache');
    res.type('html').send(shell);
  });

  return router;
}
