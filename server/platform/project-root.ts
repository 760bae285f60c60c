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
