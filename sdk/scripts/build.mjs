#!/usr/bin/env node
/**
 * Builds the SDK package (no bundler):
 *   1. (src/event-schemas.ts and src/generated/api.ts come from the root's scripts/generate.ts)
 *   2. dist/esm  (ES modules, `tsc -p tsconfig.esm.json`, then `.js` added to relative imports,
 *                 which Node's ESM loader requires and tsc does not add)
 *   3. dist/cjs  (CommonJS, `tsc -p tsconfig.cjs.json`)
 *   4. a package.json in each, saying which module system its .js and .d.ts files use.
 *
 *   node scripts/build.mjs           build
 * TypeScript is taken from the nearest node_modules (the repository root's in this repo).
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const require = createRequire(path.join(sdk, 'package.json'));
const tsc = require.resolve('typescript/bin/tsc');

// 1. src/event-schemas.ts and src/generated/api.ts are produced by the repository's
//    scripts/generate.ts (from openapi/openapi.yaml) and committed; the build only compiles them.
if (check) {
  console.log('nothing to check here: the repository test `generated files are up to date` covers src/event-schemas.ts');
  process.exit(0);
}

// 2.-3. Compile ------------------------------------------------------------------------------
const dist = path.join(sdk, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
for (const config of ['tsconfig.esm.json', 'tsconfig.cjs.json']) {
  execFileSync(process.execPath, [tsc, '-p', path.join(sdk, config)], { stdio: 'inherit' });
}

/** Adds `.js` (or `/index.js`) to relative specifiers that lack an extension. */
function addJsExtensions(dir) {
  const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]*)\2/g;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      addJsExtensions(file);
      continue;
    }
    if (!/\.(js|d\.ts)$/.test(entry.name)) continue;
    const source = fs.readFileSync(file, 'utf8');
    const rewritten = source.replace(SPECIFIER, (match, lead, quote, spec) => {
      if (/\.(m?js|cjs|json)$/.test(spec)) return match;
      const target = path.resolve(path.dirname(file), spec);
      const withExt = fs.existsSync(`${target}.js`) ? `${spec}.js` : fs.existsSync(path.join(target, 'index.js')) ? `${spec}/index.js` : null;
      if (!withExt) throw new Error(`${path.relative(sdk, file)}: cannot resolve ${spec}`);
      return `${lead}${quote}${withExt}${quote}`;
    });
    if (rewritten !== source) fs.writeFileSync(file, rewritten);
  }
}
addJsExtensions(path.join(dist, 'esm'));

// 4. Module-system markers ---------------------------------------------------------------------
fs.writeFileSync(path.join(dist, 'esm/package.json'), JSON.stringify({ type: 'module', sideEffects: false }, null, 2) + '\n');
fs.writeFileSync(path.join(dist, 'cjs/package.json'), JSON.stringify({ type: 'commonjs', sideEffects: false }, null, 2) + '\n');
console.log('built dist/esm and dist/cjs');
