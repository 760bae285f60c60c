/**
 * What the browser builders share (scripts/build-window.ts, scripts/build-dashboard.ts): the
 * precompressed variants of each file and the directory layout the server reads
 * (server/http/static-assets.ts): each file, its `.br` and `.gz`, and manifest.json, written last.
 */
import fs from 'node:fs';
import path from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { BuildResult } from 'esbuild';
import type { AssetManifest, ContentCoding } from '../server/http/static-assets';

/**
 * Refuses any warning of an esbuild run: esbuild warns and carries on where the result is quietly
 * wrong (an `@import` after other rules is dropped with its whole stylesheet; a `style` prop is no
 * warning but a CSS one is), so a warning fails the build.
 */
export function refuseWarnings(result: BuildResult, what: string): void {
  if (result.warnings.length) {
    const lines = result.warnings.map((w) => `${w.location ? `${w.location.file}:${w.location.line}: ` : ''}${w.text}`);
    throw new Error(`esbuild warned while building ${what}:\n${lines.join('\n')}`);
  }
}

/** The one output file of an esbuild run, refusing any warning (refuseWarnings). */
export function onlyOutput(result: BuildResult & { outputFiles: { contents: Uint8Array }[] }, what: string): Buffer {
  refuseWarnings(result, what);
  return Buffer.from(result.outputFiles[0].contents);
}

/** The precompressed variants, at the strongest settings: made once per build, served many times. */
export function compress(body: Buffer): Record<ContentCoding, Buffer> {
  return {
    br: brotliCompressSync(body, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
      },
    }),
    gzip: gzipSync(body, { level: 9 }),
  };
}

/** Bytes of a file as built and as sent compressed. */
export function sizeOf(body: Buffer): { bytes: number; gzip: number; br: number } {
  const c = compress(body);
  return { bytes: body.length, gzip: c.gzip.length, br: c.br.length };
}

/**
 * Writes the files (name to media type and body), their variants and manifest.json (last, with
 * `extra`'s fields beside `files`) into `dir`, which must not exist yet.
 */
export function writeAssetDir<E extends object>(dir: string, files: Record<string, { type: string; body: Buffer }>, extra: E): AssetManifest & E {
  fs.mkdirSync(dir);
  const manifest: AssetManifest & E = { ...extra, files: {} };
  for (const [name, { type, body }] of Object.entries(files)) {
    const coded = compress(body);
    const variants = { identity: name, br: `${name}.br`, gzip: `${name}.gz` };
    fs.writeFileSync(path.join(dir, variants.identity), body);
    fs.writeFileSync(path.join(dir, variants.br), coded.br);
    fs.writeFileSync(path.join(dir, variants.gzip), coded.gzip);
    manifest.files[name] = { type, variants };
  }
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}
