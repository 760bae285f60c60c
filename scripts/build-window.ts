/**
 * Builds the chat window's browser code (server/widget/browser) with esbuild, in memory: the
 * server builds it once at start and serves it (server/widget/assets.ts), so no generated file
 * lives in git and a build can never be stale. Run directly to see the sizes:
 *
 *   npx tsx scripts/build-window.ts        # loader.js, panel.js, panel.css: bytes and gzip bytes
 */
import path from 'node:path';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { fromProjectRoot } from '../server/platform/project-root';

const SOURCES = fromProjectRoot('server', 'widget', 'browser');

export interface WindowAssets {
  /** Served at an unversioned URL (the embed snippet's), so with a short cache. */
  loaderJs: Buffer;
  panelJs: Buffer;
  panelCss: Buffer;
  /** Content hash of the panel's files: their URLs carry it and are cached for a year. */
  version: string;
}

async function bundle(entry: string, format: 'iife' | 'esm'): Promise<Buffer> {
  const out = await build({
    entryPoints: [path.join(SOURCES, entry)],
    bundle: true,
    minify: true,
    write: false,
    format,
    target: ['chrome100', 'firefox100', 'safari15.4'],
    loader: { '.css': 'text' },
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'silent',
  });
  return Buffer.from(out.outputFiles[0].contents);
}

export async function buildWindowAssets(): Promise<WindowAssets> {
  const [loaderJs, panelJs, panelCss] = await Promise.all([
    bundle('loader.ts', 'iife'),
    bundle('panel.ts', 'iife'),
    // A CSS entry goes through esbuild's CSS minifier (the text loader is for the loader's import).
    build({ entryPoints: [path.join(SOURCES, 'panel.css')], bundle: true, minify: true, write: false, logLevel: 'silent' }).then((r) => Buffer.from(r.outputFiles[0].contents)),
  ]);
  const version = createHash('sha256').update(panelJs).update('\0').update(panelCss).digest('hex').slice(0, 16);
  return { loaderJs, panelJs, panelCss, version };
}

export function sizes(a: WindowAssets): Record<'loader.js' | 'panel.js' | 'panel.css', { bytes: number; gzip: number }> {
  const of = (b: Buffer) => ({ bytes: b.length, gzip: gzipSync(b, { level: 9 }).length });
  return { 'loader.js': of(a.loaderJs), 'panel.js': of(a.panelJs), 'panel.css': of(a.panelCss) };
}

if (require.main === module) {
  buildWindowAssets()
    .then((a) => {
      for (const [name, s] of Object.entries(sizes(a))) console.log(`${name.padEnd(10)} ${String(s.bytes).padStart(6)} B   gzip ${String(s.gzip).padStart(5)} B`);
      console.log(`version    ${a.version}`);
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
