import fs from 'node:fs';
import path from 'node:path';

/**
 * The project's directory (the one holding package.json), found the same way from the sources
 * (server/..., run by tsx) and from the compiled build (dist/server/..., run by node). Files read
 * at run time by path (openapi/*.yaml, sdk/schemas, the chat window's browser sources) are resolved
 * from it, never from a module's own directory, whose depth differs between the two.
 */
function findProjectRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json in ${from} or above it`);
  }
}

const PROJECT_ROOT = findProjectRoot(__dirname);

/** A path inside the project: `fromProjectRoot('openapi', 'openapi.yaml')`. */
export const fromProjectRoot = (...segments: string[]): string => path.join(PROJECT_ROOT, ...segments);

/**
 * The build this code runs from (.dist/<id>, reached through dist/) when it was compiled; undefined
 * when it runs from the sources (tsx: the tests, `npm run demo`). A build marks itself complete with
 * build.json (scripts/build.js).
 */
export const ownBuild: string | undefined = (() => {
  const dir = path.resolve(__dirname, '..', '..');
  return fs.existsSync(path.join(dir, 'build.json')) ? dir : undefined;
})();
