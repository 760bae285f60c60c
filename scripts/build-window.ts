/**
 * Builds the chat window's browser code (server/window/browser) with esbuild into a directory of
 * the build (`npm run build`, scripts/build.js, writes it to <build>/window): minified files, their
 * brotli and gzip variants, and manifest.json. The server only reads them (server/window/assets.ts):
 * no compiler and no compression at run time. Run directly to see the sizes:
 *
 *   npx tsx scripts/build-window.ts        # loader.js, panel.js, panel.css: bytes, gzip and brotli bytes
 */
import path from 'node:path';
import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import { fromProjectRoot } from '../server/platform/project-root';
import type { WindowManifest } from '../server/window/assets';
import { onlyOutput, sizeOf, writeAssetDir } from './build-assets';

const SOURCES = fromProjectRoot('server', 'window', 'browser');

export interface WindowFiles {
  /** Served at an unversioned URL (the embed snippet's), so with a short cache. */
  'loader.js': Buffer;
  'panel.js': Buffer;
  'panel.css': Buffer;
}

const TYPES: Record<keyof WindowFiles, string> = {
  'loader.js': 'application/javascript; charset=utf-8',
  'panel.js': 'application/javascript; charset=utf-8',
  'panel.css': 'text/css; charset=utf-8',
};

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
  return onlyOutput(out, entry);
}

export async function bundleWindow(): Promise<WindowFiles> {
  const [loaderJs, panelJs, panelCss] = await Promise.all([
    bundle('loader.ts', 'iife'),
    bundle('panel.ts', 'iife'),
    // A CSS entry goes through esbuild's CSS minifier (the text loader is for the loader's import).
    build({ entryPoints: [path.join(SOURCES, 'panel.css')], bundle: true, minify: true, write: false, logLevel: 'silent' }).then((r) =>
      onlyOutput(r, 'panel.css'),
    ),
  ]);
  return { 'loader.js': loaderJs, 'panel.js': panelJs, 'panel.css': panelCss };
}

/** Writes the files, their variants and manifest.json (last) into `dir`, which must not exist yet. */
export async function writeWindowAssets(dir: string): Promise<WindowManifest> {
  const files = await bundleWindow();
  // The panel's URLs carry this hash: a new build gets new URLs, so year-long caching is safe.
  const version = createHash('sha256').update(files['panel.js']).update('\0').update(files['panel.css']).digest('hex').slice(0, 16);
  const typed = Object.fromEntries(Object.entries(files).map(([name, body]) => [name, { type: TYPES[name as keyof WindowFiles], body }]));
  return writeAssetDir(dir, typed, { version });
}

export function sizes(files: WindowFiles): Record<keyof WindowFiles, { bytes: number; gzip: number; br: number }> {
  return { 'loader.js': sizeOf(files['loader.js']), 'panel.js': sizeOf(files['panel.js']), 'panel.css': sizeOf(files['panel.css']) };
}

if (require.main === module) {
  bundleWindow()
    .then((files) => {
      for (const [name, s] of Object.entries(sizes(files))) {
        console.log(`${name.padEnd(10)} ${String(s.bytes).padStart(6)} B   gzip ${String(s.gzip).padStart(5)} B   brotli ${String(s.br).padStart(5)} B`);
      }
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
