// @ts-check
/**
 * One build for every process (plain JavaScript, so it runs before anything is compiled):
 *
 *   node scripts/build.js              `npm run build`: build now
 *   node scripts/build.js --if-stale   what `npm start`, `npm run worker`, `npm run admin` and
 *                                      `npm run db:migrate` run first: build only when there is no
 *                                      build or a source changed since it (a stat of each source)
 *
 * A build is the server (server/**\/*.ts, file by file, CommonJS with source maps; server/**\/*.cjs as they are) and the browser
 * files of the chat window (scripts/build-window.ts) and of the dashboard (scripts/build-dashboard.ts),
 * minified, with brotli and gzip variants (scripts/build-assets.ts), and the OpenAPI documents the
 * server reads, as written and parsed (openapi/<name>.yaml and .json). It is
 * written into a fresh directory .dist/.tmp-*, renamed to .dist/<id> (id: a hash of the sources
 * and the compiler's version), and `dist` is a symlink switched to it by rename(2). So:
 * - no process ever sees a half-written tree: `dist` names a complete build or the one before;
 * - a process already running keeps reading its own build: Node resolves `dist/...` to the real
 *   .dist/<id>/... path when it loads a module, and the build it was started from is kept (the
 *   current and the previous builds stay; older ones are removed once ten minutes old);
 * - starters racing each other cannot break one another: the same sources give the same id, a
 *   rename onto an existing build just loses, and a lock file (.dist/.lock) only saves them from
 *   compiling the same thing twice (a stale lock, or one held too long, is passed over).
 * Nothing here runs at run time: the server reads the built files and never loads esbuild.
 */
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { createHash, randomBytes } = require('node:crypto');

/** Bumped when the layout of a build changes, so older builds count as stale. */
const BUILD_FORMAT = 4;
/** Directories of browser code: bundled by scripts/build-window.ts and scripts/build-dashboard.ts, not compiled as server files. */
const BROWSER_SOURCES = ['server/window/browser/', 'server/dashboard/browser/', 'server/browser-shared/'];
/** Browser modules the server also runs: the window's markdown parser renders messages in emails (pure, no DOM at load). */
const SHARED_WITH_SERVER = ['server/window/browser/markdown.ts'];
/** The hand-written documents the server reads (openapi/<name>.yaml): a build carries each, also parsed. */
const OPENAPI_DOCUMENTS = ['openapi', 'window', 'manage'];
/** Builds other than the current and the previous one are removed once this old. */
const KEEP_MS = 10 * 60_000;
/** A lock held longer than this is taken over (its holder hung, or died on another host). */
const LOCK_STALE_MS = 120_000;

/**
 * @typedef {{ size: number, mtimeMs: number, sha256: string }} InputStamp
 * @typedef {{ format: number, id: string, compiler: string, inputs: Record<string, InputStamp> }} BuildManifest
 */

/** @param {string} file */
const sha256File = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/**
 * The sources a build is made of, relative to root: every file under server/ (the browser code and
 * its CSS included), the browser builders, this script and the compiler settings.
 * @param {string} root
 */
function inputFiles(root) {
  /** @type {string[]} */
  const files = [];
  /** @param {string} rel */
  const walk = (rel) => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = path.posix.join(rel, entry.name);
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) files.push(child);
    }
  };
  walk('server');
  files.push(...OPENAPI_DOCUMENTS.map((name) => `openapi/${name}.yaml`));
  files.push('scripts/build-assets.ts', 'scripts/build-dashboard.ts', 'scripts/build-window.ts', 'scripts/build.js', 'tsconfig.json');
  return files.sort();
}

/** @param {string} root */
function compilerVersion(root) {
  return `esbuild ${require(require.resolve('esbuild/package.json', { paths: [root] })).version}`;
}

/**
 * Is the current build (dist/) made from these sources? Sizes and modification times first; a file
 * whose time differs is hashed (a fresh checkout, or a copy, changes times but not contents).
 * @param {string} root
 */
function isFresh(root) {
  /** @type {BuildManifest} */
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(root, 'dist', 'build.json'), 'utf8'));
  } catch {
    return false;
  }
  if (manifest.format !== BUILD_FORMAT || manifest.compiler !== compilerVersion(root)) return false;
  const files = inputFiles(root);
  if (files.length !== Object.keys(manifest.inputs).length) return false;
  return files.every((rel) => {
    const stamp = manifest.inputs[rel];
    if (!stamp) return false;
    const file = path.join(root, rel);
    const st = fs.statSync(file);
    return st.size === stamp.size && (st.mtimeMs === stamp.mtimeMs || sha256File(file) === stamp.sha256);
  });
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes .dist/.lock, waiting while another builder holds it. Answers whether it was taken: after
 * LOCK_STALE_MS of waiting it is not, and the caller builds anyway (correctness never rests on it).
 * @param {string} lockFile
 * @param {() => boolean} done  checked while waiting: the other builder may have made what we need
 * @returns {Promise<'taken' | 'done' | 'not taken'>}
 */
async function lock(lockFile, done) {
  const started = Date.now();
  for (;;) {
    try {
      fs.writeFileSync(lockFile, JSON.stringify({ pid: process.pid, host: os.hostname(), at: Date.now() }), { flag: 'wx' });
      return 'taken';
    } catch (err) {
      if (/** @type {NodeJS.ErrnoException} */ (err).code !== 'EEXIST') throw err;
    }
    if (lockIsStale(lockFile)) {
      fs.rmSync(lockFile, { force: true });
      continue;
    }
    if (Date.now() - started > LOCK_STALE_MS) return 'not taken';
    await sleep(50);
    if (done()) return 'done';
  }
}

/** @param {string} lockFile */
function lockIsStale(lockFile) {
  let writtenAt;
  try {
    writtenAt = fs.statSync(lockFile).mtimeMs;
  } catch {
    return false; // released meanwhile
  }
  let holder;
  try {
    holder = JSON.parse(fs.readFileSync(lockFile, 'utf8'));
  } catch {
    // It is written in one call: unreadable for seconds means its writer died in the middle.
    return Date.now() - writtenAt > 5000;
  }
  if (Date.now() - holder.at > LOCK_STALE_MS) return true;
  if (holder.host !== os.hostname()) return false;
  try {
    process.kill(holder.pid, 0); // throws ESRCH when the holder died without removing it
    return false;
  } catch (err) {
    return /** @type {NodeJS.ErrnoException} */ (err).code === 'ESRCH';
  }
}

/**
 * Compiles into a fresh temporary directory and renames it to .dist/<id>. Answers the id.
 * @param {string} root
 */
async function compile(root) {
  const builds = path.join(root, '.dist');
  const compiler = compilerVersion(root);
  const files = inputFiles(root);
  /** @type {Record<string, InputStamp>} */
  const inputs = {};
  const id = createHash('sha256').update(`${BUILD_FORMAT}\0${compiler}\0`);
  for (const rel of files) {
    const st = fs.statSync(path.join(root, rel));
    inputs[rel] = { size: st.size, mtimeMs: st.mtimeMs, sha256: sha256File(path.join(root, rel)) };
    id.update(`${rel}\0${inputs[rel].sha256}\0`);
  }
  const buildId = id.digest('hex').slice(0, 20);
  const target = path.join(builds, buildId);
  if (fs.existsSync(path.join(target, 'build.json'))) return buildId; // these sources were built before

  const tmp = fs.mkdtempSync(path.join(builds, '.tmp-'));
  fs.chmodSync(tmp, 0o755); // mkdtemp makes it private; the build is read by whoever runs the service
  try {
    const { build } = require(require.resolve('esbuild', { paths: [root] }));
    await build({
      absWorkingDir: root,
      // Browser code (the window's and the dashboard's) is bundled by its own builder below, never run as server code.
      entryPoints: files.filter(
        (f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && (SHARED_WITH_SERVER.includes(f) || !BROWSER_SOURCES.some((dir) => f.startsWith(dir))),
      ),
      outdir: tmp,
      outbase: '.',
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      supported: { 'dynamic-import': false },
      sourcemap: true,
      logLevel: 'warning',
    });
    // Plain CommonJS server files (a worker thread's body, which cannot be TypeScript) are copied as they are.
    for (const rel of files.filter((f) => f.startsWith('server/') && f.endsWith('.cjs'))) {
      fs.mkdirSync(path.dirname(path.join(tmp, rel)), { recursive: true });
      fs.copyFileSync(path.join(root, rel), path.join(tmp, rel));
    }
    // Each document as it is and parsed to JSON, which a start reads in milliseconds (the YAML parser took most of a second).
    const YAML = require(require.resolve('yaml', { paths: [root] }));
    fs.mkdirSync(path.join(tmp, 'openapi'));
    for (const name of OPENAPI_DOCUMENTS) {
      const text = fs.readFileSync(path.join(root, 'openapi', `${name}.yaml`), 'utf8');
      fs.writeFileSync(path.join(tmp, 'openapi', `${name}.yaml`), text);
      fs.writeFileSync(path.join(tmp, 'openapi', `${name}.json`), JSON.stringify(YAML.parse(text)));
    }
    // The browser builders, just compiled with the rest, write the browser files.
    await require(path.join(tmp, 'scripts', 'build-window.js')).writeWindowAssets(path.join(tmp, 'window'));
    await require(path.join(tmp, 'scripts', 'build-dashboard.js')).writeDashboardAssets(path.join(tmp, 'dashboard'));
    /** @type {BuildManifest} */
    const manifest = { format: BUILD_FORMAT, id: buildId, compiler, inputs };
    fs.writeFileSync(path.join(tmp, 'build.json'), JSON.stringify(manifest, null, 1) + '\n'); // last: marks it complete
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      // Another builder finished the same sources first: its build is this one.
      if (!['ENOTEMPTY', 'EEXIST'].includes(/** @type {NodeJS.ErrnoException} */ (err).code ?? '')) throw err;
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(path.join(target, 'build.json'))) throw new Error(`${target} is not a complete build (changed by hand?): remove it and build again`);
    }
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return buildId;
}

/**
 * Points dist at .dist/<id> in one rename(2) of a new symlink over the old one. A dist/ that is a
 * real directory (made by an older version of this script) is moved aside first, once.
 * @param {string} root
 * @param {string} buildId
 */
function switchTo(root, buildId) {
  const dist = path.join(root, 'dist');
  const link = path.join(root, '.dist', `.link-${randomBytes(6).toString('hex')}`);
  // Relative, so the checkout can move; resolved from dist's own directory once renamed there.
  fs.symlinkSync(path.join('.dist', buildId), link);
  try {
    const st = fs.lstatSync(dist, { throwIfNoEntry: false });
    if (st?.isDirectory()) fs.renameSync(dist, path.join(root, '.dist', `.old-${randomBytes(6).toString('hex')}`));
    fs.renameSync(link, dist);
  } catch (err) {
    fs.rmSync(link, { force: true });
    throw err;
  }
}

/**
 * Removes builds other than the current and the previous one, and leftovers of crashed builders,
 * once older than KEEP_MS (a builder racing this one may have just made them).
 * @param {string} root
 * @param {string[]} keep
 */
function collect(root, keep) {
  const builds = path.join(root, '.dist');
  for (const name of fs.readdirSync(builds)) {
    if (keep.includes(name) || name === '.lock') continue;
    const dir = path.join(builds, name);
    try {
      if (Date.now() - fs.lstatSync(dir).mtimeMs > KEEP_MS) fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // removed by another builder meanwhile
    }
  }
}

/** @param {string} root */
function currentId(root) {
  try {
    return path.basename(fs.readlinkSync(path.join(root, 'dist')));
  } catch {
    return undefined;
  }
}

/**
 * Makes sure dist/ is a build of the current sources (always compiling anew unless ifStale).
 * Answers what it did.
 * @param {{ root?: string, ifStale?: boolean }} [opts]
 * @returns {Promise<{ id: string | undefined, built: boolean, ms: number }>}
 */
async function ensureBuild({ root = path.resolve(__dirname, '..'), ifStale = false } = {}) {
  const started = Date.now();
  if (ifStale && isFresh(root)) return { id: currentId(root), built: false, ms: Date.now() - started };
  fs.mkdirSync(path.join(root, '.dist'), { recursive: true });
  const lockFile = path.join(root, '.dist', '.lock');
  const held = await lock(lockFile, () => ifStale && isFresh(root));
  if (held === 'done') return { id: currentId(root), built: false, ms: Date.now() - started };
  try {
    if (ifStale && isFresh(root)) return { id: currentId(root), built: false, ms: Date.now() - started };
    const previous = currentId(root);
    const buildId = await compile(root);
    switchTo(root, buildId);
    collect(root, [buildId, ...(previous ? [previous] : [])]);
    return { id: buildId, built: true, ms: Date.now() - started };
  } finally {
    if (held === 'taken') fs.rmSync(lockFile, { force: true });
  }
}

module.exports = { ensureBuild, isFresh };

if (require.main === module) {
  const ifStale = process.argv.includes('--if-stale');
  ensureBuild({ ifStale }).then(
    (r) => {
      // Quiet when nothing was built: the CLI's --json output follows on stdout.
      if (!ifStale) process.stderr.write(`dist -> .dist/${r.id} (${r.ms} ms)\n`);
    },
    (err) => {
      process.stderr.write(`build failed: ${err instanceof Error ? err.stack : err}\n`);
      process.exit(1);
    },
  );
}
