/**
 * Builds the dashboard's browser code (server/dashboard/browser: Preact and TSX) with esbuild into a
 * directory of the build (scripts/build.js writes it to <build>/dashboard): one script and one
 * stylesheet, minified, named by their content hash (so served immutable for a year), with brotli
 * and gzip variants and manifest.json naming the two, with the first load's size as built
 * (`firstLoad`). Run directly to see the sizes, and with `--docs` to write them into
 * docs/dashboard.md (test/browser/dashboard-assets.test.ts fails when the docs drift from them):
 *
 *   npx tsx scripts/build-dashboard.ts [--docs]
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import { fromProjectRoot } from '../server/platform/project-root';
import type { DashboardManifest, FirstLoadSizes, SentSize } from '../server/dashboard/routes';
import { shellHtml } from '../server/dashboard/shell';
import { onlyOutput, sizeOf, writeAssetDir } from './build-assets';

const SOURCES = fromProjectRoot('server', 'dashboard', 'browser');
export const DOCS = fromProjectRoot('docs', 'dashboard.md');

/** What the shell loads, everything included, gzip: the first load's budget (checked by test/browser/dashboard-assets.test.ts). */
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

/** The first load as sent: the shell, its script and its stylesheet, each compressed as the server sends them. */
export function measureFirstLoad(html: string, js: Buffer, css: Buffer): FirstLoadSizes {
  const sent = (body: Buffer): SentSize => {
    const { br, gzip } = sizeOf(body);
    return { br, gzip };
  };
  const [h, s, c] = [sent(Buffer.from(html)), sent(js), sent(css)];
  return { html: h, script: s, style: c, total: { br: h.br + s.br + c.br, gzip: h.gzip + s.gzip + c.gzip } };
}

/** Writes the two files, their variants and manifest.json (last) into `dir`, which must not exist yet. */
export async function writeDashboardAssets(dir: string): Promise<DashboardManifest> {
  const { js, css } = await bundleDashboard();
  const names = { script: hashName(js, 'js'), style: hashName(css, 'css') };
  return writeAssetDir(
    dir,
    {
      [names.script]: { type: 'application/javascript; charset=utf-8', body: js },
      [names.style]: { type: 'text/css; charset=utf-8', body: css },
    },
    { ...names, firstLoad: measureFirstLoad(shellHtml(names), js, css) },
  );
}

/*
 * The docs' figures live between two markers in docs/dashboard.md, written from a measurement by
 * `--docs` and read back by the test, so the sentence's form is known in one place (here).
 */
const BEGIN = '<!-- first-load:begin (written by `npx tsx scripts/build-dashboard.ts --docs`) -->';
const END = '<!-- first-load:end -->';
const KB = 1024;
const kb = (bytes: number) => (bytes / KB).toFixed(1);
/** The measured figures of the sentence, in the order it states them. */
export const figuresOf = (f: FirstLoadSizes) => [f.total.br, f.total.gzip, f.script.br, f.script.gzip, f.style.br, f.style.gzip, f.html.br, f.html.gzip];

export function firstLoadSentence(f: FirstLoadSizes): string {
  return (
    `Now: **${kb(f.total.br)} KB brotli** (what browsers are sent), ${kb(f.total.gzip)} KB gzip, of the ` +
    `${FIRST_LOAD_BUDGET_GZIP / KB} KB budget: the script ${kb(f.script.br)} KB brotli, ${kb(f.script.gzip)} KB gzip; ` +
    `the stylesheet ${kb(f.style.br)} KB, ${kb(f.style.gzip)} KB; the HTML ${kb(f.html.br)} KB, ${kb(f.html.gzip)} KB.`
  );
}

/** `docs` with its first-load block holding `f`'s sentence. */
export function withFirstLoad(docs: string, f: FirstLoadSizes): string {
  const at = docs.indexOf(BEGIN);
  const end = docs.indexOf(END);
  if (at < 0 || end < at) throw new Error(`docs/dashboard.md has no block between ${BEGIN} and ${END}`);
  return `${docs.slice(0, at + BEGIN.length)}\n${firstLoadSentence(f)}\n${docs.slice(end)}`;
}

/** The figures docs/dashboard.md states, in bytes and in the order of `figuresOf` (rounded as written). */
export function statedFirstLoad(docs: string): number[] {
  const at = docs.indexOf(BEGIN);
  const end = docs.indexOf(END);
  if (at < 0 || end < at) throw new Error(`docs/dashboard.md has no block between ${BEGIN} and ${END}`);
  const block = docs.slice(at + BEGIN.length, end);
  // Measured figures carry one decimal; the budget ("60 KB") carries none and is not read.
  return [...block.matchAll(/(\d+\.\d) KB/g)].map((m) => Math.round(Number(m[1]) * KB));
}

if (require.main === module) {
  bundleDashboard()
    .then(({ js, css }) => {
      const names = { script: hashName(js, 'js'), style: hashName(css, 'css') };
      const f = measureFirstLoad(shellHtml(names), js, css);
      for (const [name, v] of Object.entries(f)) console.log(`${name.padEnd(7)} brotli ${String(v.br).padStart(6)} B   gzip ${String(v.gzip).padStart(6)} B`);
      console.log(`first load gzip ${f.total.gzip} B of the ${FIRST_LOAD_BUDGET_GZIP} B budget`);
      if (process.argv.includes('--docs')) {
        fs.writeFileSync(DOCS, withFirstLoad(fs.readFileSync(DOCS, 'utf8'), f));
        console.log(`wrote the figures into ${path.relative(process.cwd(), DOCS)}`);
      }
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
