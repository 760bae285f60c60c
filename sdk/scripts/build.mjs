#!/usr/bin/env node
/**
 * Builds the SDK package (no bundler):
 *   1. dist/esm  (ES modules, `tsc -p tsconfig.esm.json`)
 *   2. dist/cjs  (CommonJS, `tsc -p tsconfig.cjs.json`)
 *   3. a package.json in each, saying which module system its .js and .d.ts files use.
 * The sources write `.js` in their relative imports, which Node's ES module loader requires and
 * tsc keeps as written, so the output needs no rewriting. src/event-schemas.ts and
 * src/generated/api.ts come from the repository's scripts/generate.ts and are compiled like the rest.
 *
 *   node scripts/build.mjs
 * TypeScript is taken from the nearest node_modules (the repository root's in this repo).
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(sdk, 'package.json'));
const tsc = require.resolve('typescript/bin/tsc');

const dist = path.join(sdk, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
for (const config of ['tsconfig.esm.json', 'tsconfig.cjs.json']) {
  execFileSync(process.execPath, [tsc, '-p', path.join(sdk, config)], { stdio: 'inherit' });
}

fs.writeFileSync(path.join(dist, 'esm/package.json'), JSON.stringify({ type: 'module', sideEffects: false }, null, 2) + '\n');
fs.writeFileSync(path.join(dist, 'cjs/package.json'), JSON.stringify({ type: 'commonjs', sideEffects: false }, null, 2) + '\n');
console.log('built dist/esm and dist/cjs');
