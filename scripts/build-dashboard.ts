/**
 * Builds the dashboard's browser code (server/dashboard/browser: Preact and TSX) with esbuild into a
 * directory of the build (scripts/build.js writes it to <build>/dashboard): the script split into ES
 * modules (the entry and a chunk per page, see `BuiltScript`) and one stylesheet, minified, named by
 * their content hash (so served immutable for a year), with brotli and gzip variants and
 * manifest.json naming the entry, what the shell preloads and the stylesheet, with the first load's
 * size as built (`firstLoad`). Run directly to see the sizes, and with `--docs` to write them into
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
import { onlyOutput, refuseWarnings, sizeOf, writeAssetDir } from './build-assets';

const SOURCES = fromProjectRoot('server', 'dashboard', 'browser');
export const DOCS = fromProjectRoot('docs', 'dashboard.md');

/** What the shell loads, everything included, gzip: the first load's budget (checked by test/browser/dashboard-assets.test.ts). */
export const FIRST_LOAD_BUDGET_GZIP = 60 * 1024;

/** One built file of the script: its name in the assets directory and its bytes. */
export interface ScriptFile {
  name: string;
  body: Buffer;
}

/**
 * The script, split: the entry (the shell, sign-in, the router) and one chunk per lazily loaded
 * page plus the chunks they share, all ES modules named by esbuild's content hash (which covers
 * what each file imports, so a changed chunk renames its importers too). `firstLoad` lists, entry
 * first, what an agent opening the dashboard needs: the entry, what it imports statically, and the
 * inbox page (where `/` leads) with its own static imports. The shell preloads all of them at once,
 * so the split adds no round trip to that path; the other pages load on first visit.
 */
export interface BuiltScript {
  files: ScriptFile[];
  firstLoad: string[];
}

/** The page the first load includes: where a signed-in account lands. */
const LANDING_PAGE = path.join('pages', 'inbox.tsx');

export async function bundleDashboard(): Promise<{ script: BuiltScript; css: Buffer }> {
  const common = { bundle: true, minify: true, write: false, legalComments: 'none', charset: 'utf8', logLevel: 'silent' } as const;
  const [js, css] = await Promise.all([
    build({
      ...common,
      entryPoints: [path.join(SOURCES, 'main.tsx')],
      format: 'esm',
      splitting: true,
      // Not written (write: false), but splitting needs a directory to name the files relative to.
      outdir: OUT,
      entryNames: '[hash]',
      chunkNames: '[hash]',
      metafile: true,
      target: ['chrome100', 'firefox100', 'safari15.4'],
      // TSX to Preact's automatic runtime: no `h` imports, no `htm` strings parsed at run time.
      jsx: 'automatic',
      jsxImportSource: 'preact',
      define: { 'process.env.NODE_ENV': '"production"' },
    }),
    build({ ...common, entryPoints: [path.join(SOURCES, 'dashboard.css')] }),
  ]);
  return { script: scriptOf(js), css: onlyOutput(css, 'the dashboard stylesheet') };
}

const OUT = path.join(SOURCES, '.out');
const hashName = (body: Buffer, ext: string) => `${createHash('sha256').update(body).digest('hex').slice(0, 20)}.${ext}`;

/** The split build's files, and the first load found by following static imports in the metafile. */
function scriptOf(result: Awaited<ReturnType<typeof build>> & { outputFiles: { path: string; contents: Uint8Array }[] }): BuiltScript {
  refuseWarnings(result, 'the dashboard script');
  const outputs = result.metafile!.outputs;
  const nameOf = (output: string) => path.basename(output);
  const entry = Object.keys(outputs).find((o) => outputs[o].entryPoint && path.resolve(outputs[o].entryPoint!) === path.join(SOURCES, 'main.tsx'));
  const landing = Object.keys(outputs).find((o) => outputs[o].entryPoint && path.resolve(outputs[o].entryPoint!) === path.join(SOURCES, LANDING_PAGE));
  if (!entry || !landing) throw new Error('the dashboard build has no entry or no inbox chunk: is the inbox page still loaded lazily?');
  const needed: string[] = [];
  const follow = (output: string) => {
    if (needed.includes(output)) return;
    needed.push(output);
    for (const i of outputs[output].imports) if (i.kind === 'import-statement' && !i.external) follow(i.path);
  };
  follow(entry);
  follow(landing);
  const files = result.outputFiles.filter((f) => f.path.endsWith('.js')).map((f) => ({ name: nameOf(f.path), body: Buffer.from(f.contents) }));
  const known = new Set(files.map((f) => f.name));
  const firstLoad = needed.map(nameOf);
  if (firstLoad.some((n) => !known.has(n))) throw new Error('the dashboard metafile names a file the build did not make');
  return { files, firstLoad };
}

/** The first load as sent: the shell, the first load's scripts and the stylesheet, each compressed as the server sends them. */
export function measureFirstLoad(html: string, scripts: Buffer[], css: Buffer): FirstLoadSizes {
  const sent = (body: Buffer): SentSize => {
    const { br, gzip } = sizeOf(body);
    return { br, gzip };
  };
  const h = sent(Buffer.from(html));
  const s = scripts.map(sent).reduce((a, b) => ({ br: a.br + b.br, gzip: a.gzip + b.gzip }), { br: 0, gzip: 0 });
  const c = sent(css);
  return { html: h, script: s, style: c, total: { br: h.br + s.br + c.br, gzip: h.gzip + s.gzip + c.gzip } };
}

/** Bytes of the pages loaded later, gzip: all scripts not in the first load (for the docs and the build's output). */
export function laterGzip(script: BuiltScript): number {
  return script.files.filter((f) => !script.firstLoad.includes(f.name)).reduce((n, f) => n + sizeOf(f.body).gzip, 0);
}

function namesOf(script: BuiltScript, css: Buffer) {
  const [entry, ...preload] = script.firstLoad;
  return { script: entry, preload, style: hashName(css, 'css') };
}

const body = (script: BuiltScript, name: string) => script.files.find((f) => f.name === name)!.body;

/** Writes the files, their variants and manifest.json (last) into `dir`, which must not exist yet. */
export async function writeDashboardAssets(dir: string): Promise<DashboardManifest> {
  const { script, css } = await bundleDashboard();
  const names = namesOf(script, css);
  const files: Record<string, { type: string; body: Buffer }> = { [names.style]: { type: 'text/css; charset=utf-8', body: css } };
  for (const f of script.files) files[f.name] = { type: 'application/javascript; charset=utf-8', body: f.body };
  const firstLoad = measureFirstLoad(
    shellHtml(names),
    script.firstLoad.map((n) => body(script, n)),
    css,
  );
  return writeAssetDir(dir, files, { ...names, firstLoad });
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
    .then(({ script, css }) => {
      const names = namesOf(script, css);
      const f = measureFirstLoad(
        shellHtml(names),
        script.firstLoad.map((n) => body(script, n)),
        css,
      );
      for (const [name, v] of Object.entries(f)) console.log(`${name.padEnd(7)} brotli ${String(v.br).padStart(6)} B   gzip ${String(v.gzip).padStart(6)} B`);
      console.log(`first load gzip ${f.total.gzip} B of the ${FIRST_LOAD_BUDGET_GZIP} B budget (${script.firstLoad.length} scripts)`);
      console.log(`loaded later: ${script.files.length - script.firstLoad.length} scripts, ${laterGzip(script)} B gzip`);
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
