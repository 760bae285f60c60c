import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { fromProjectRoot, ownBuild } from '../platform/project-root';
import { ApiError } from '../platform/errors';
import type { Logger } from '../platform/logger';

/**
 * Browser files made by the build (the chat window's, scripts/build-window.ts; the dashboard's,
 * scripts/build-dashboard.ts), served from memory: each file with its brotli and gzip variants,
 * made at build time (scripts/build-assets.ts), an ETag per variant and content negotiation by
 * Accept-Encoding. Nothing is compiled or compressed while serving.
 */

export type ContentCoding = 'br' | 'gzip';

/** `manifest.json` of a build's asset directory: each served file by name, its media type and the file of each variant. */
export interface AssetManifest {
  files: Record<string, { type: string; variants: { identity: string } & Partial<Record<ContentCoding, string>> }>;
}

interface Variant {
  body: Buffer;
  etag: string;
}
export interface Asset {
  type: string;
  identity: Variant;
  coded: Partial<Record<ContentCoding, Variant>>;
}

/**
 * A directory of the build this code runs from (`window`, `dashboard`): beside its server/
 * directory when compiled (a build in .dist/<id>, reached through dist/), else (run from the
 * sources by tsx: the tests, `npm run demo`) the current build's, dist/<name>.
 */
export function builtAssetDir(name: string): string {
  return ownBuild ? path.join(ownBuild, name) : fromProjectRoot('dist', name);
}

function variant(body: Buffer): Variant {
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/**
 * Reads a build's asset directory into memory, answering its manifest (with whatever else the
 * builder put there) and the files. The directory is resolved first, so a build switched in
 * meanwhile (dist/ is a symlink) cannot mix two builds.
 */
export function loadAssetDir<M extends AssetManifest>(dir: string): { manifest: M; files: Map<string, Asset> } {
  const real = fs.realpathSync(dir);
  const manifest = JSON.parse(fs.readFileSync(path.join(real, 'manifest.json'), 'utf8')) as M;
  const files = new Map<string, Asset>();
  const read = (file: string) => {
    if (path.basename(file) !== file) throw new Error(`the manifest in ${dir} names a file outside its directory: ${file}`);
    return variant(fs.readFileSync(path.join(real, file)));
  };
  for (const [name, f] of Object.entries(manifest.files)) {
    const { identity, ...coded } = f.variants;
    files.set(name, { type: f.type, identity: read(identity), coded: Object.fromEntries(Object.entries(coded).map(([c, file]) => [c, read(file)])) });
  }
  return { manifest, files };
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

/**
 * Sends one of the build's files in the best coding the client accepts. `crossOrigin`: other
 * sites' pages load it (the chat window's scripts), so Cross-Origin-Resource-Policy says so;
 * otherwise it is `same-origin`.
 */
export function sendAsset(req: Request, res: Response, asset: Asset, cacheControl: string, crossOrigin = false): void {
  const coding = chooseCoding(req.headers['accept-encoding'], Object.keys(asset.coded) as ContentCoding[]);
  const chosen = coding === 'identity' ? asset.identity : asset.coded[coding]!;
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('Cache-Control', cacheControl);
  res.setHeader('ETag', chosen.etag);
  res.setHeader('Cross-Origin-Resource-Policy', crossOrigin ? 'cross-origin' : 'same-origin');
  if (notModified(req, chosen.etag)) {
    res.status(304).end();
    return;
  }
  res.setHeader('Content-Type', asset.type);
  if (coding !== 'identity') res.setHeader('Content-Encoding', coding);
  res.setHeader('Content-Length', String(chosen.body.length));
  res.status(200).end(chosen.body);
}

/** What content-hashed files are served with: a new build gets new names, so a year is safe. */
export const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * Reads a build's files now, at start, and answers the function routes call to get them. A missing
 * or broken build is logged once, and every request for them answers 503 until a restart; the rest
 * of the service runs. `what` names them for people: "chat window", "dashboard".
 */
export function loadAtStart<T>(load: () => T, logger: Logger, what: string): () => T {
  let assets: T | undefined;
  try {
    assets = load();
  } catch (err) {
    logger.error({ err: { message: (err as Error).message } }, `the ${what}'s files are missing from the build: run npm run build`);
  }
  return () => {
    if (!assets) throw new ApiError('service_unavailable', `The ${what} is not available on this instance.`, undefined, { 'Retry-After': '60' });
    return assets;
  };
}
