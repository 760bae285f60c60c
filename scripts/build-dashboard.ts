/**
 * Builds the dashboard's browser code (server/dashboard/browser: Preact and TSX) with esbuild into a
 * directory of the build (scripts/build.js writes it to <build>/dashboard): one script and one
 * stylesheet, minified, named by their content hash (so served immutable for a year), with brotli
 * and gzip variants and manifest.json naming the two. The server only reads them
 * (server/dashboard/routes.ts). Run directly to see the sizes of the first load:
 *
 *   npx tsx scripts/build-dashboard.ts
 */
import path from 'node:path';
import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import { fromProjectRoot } from '../server/platform/project-root';
import type { DashboardManifest } from '../server/dashboard/routes';
import { onlyOutput, sizeOf, writeAssetDir } from './build-assets';

const SOURCES = fromProjectRoot('server', 'dashboard', 'browser');

/** What the shell loads, everything included, gzip: the first load's budget (checked by test/transport/dashboard-build.test.ts). */
export const FIRST_LOAD_BUDGET_GZIP = 60 * 1024;

export async function bundleDashboard(): Promise<{ js: Buffer; css: Buffer }> {
  const common = { bundle: true, minify: true, write: false, legalComments: 'none', charset: 'utf8', logLevel: 'silent' } as const;
  const [js, css] = await Promise.all([
    build({
      ...common,
      entryPoints: [path.join(SOURCES, 'main.tsx')],
      format: 'iife',
      target: ['chrome100', 'firefox100', 'safari15.4'],
      // TSX to Preact's automatic runtime: no `h` imports, no `htm` strings parsed at run time.
      jsx: 'automatic',
      jsxImportSource: 'preact',
      define: { 'process.env.NODE_ENV': '"production"' },
    }),
    build({ ...common, entryPoints: [path.join(SOURCES, 'dashboard.css')] }),
  ]);
  return { js: onlyOutput(js, 'the dashboard script'), css: onlyOutput(css, 'the dashboard stylesheet') };
}

const hashName = (body: Buffer, ext: string) => `${createHash('sha256').update(body).digest('hex').slice(0, 20)}.${ext}`;

/** Writes the two files, their variants and manifest.json (last) into `dir`, which must not exist yet. */
export async function writeDashboardAssets(dir: string): Promise<DashboardManifest> {
  const { js, css } = await bundleDashboard();
  const script = hashName(js, 'js');
  const style = hashName(css, 'css');
  return writeAssetDir(
    dir,
    {
      [script]: { type: 'application/javascript; charset=utf-8', body: js },
      [style]: { type: 'text/css; charset=utf-8', body: css },
    },
    { script, style },
  );
}

if (require.main === module) {
  bundleDashboard()
    .then(({ js, css }) => {
      const s = { 'main.js': sizeOf(js), 'dashboard.css': sizeOf(css) };
      for (const [name, v] of Object.entries(s)) {
        console.log(`${name.padEnd(14)} ${String(v.bytes).padStart(7)} B   gzip ${String(v.gzip).padStart(6)} B   brotli ${String(v.br).padStart(6)} B`);
      }
      const total = s['main.js'].gzip + s['dashboard.css'].gzip;
      console.log(`first load     gzip ${total} B of ${FIRST_LOAD_BUDGET_GZIP} B`);
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
