/** Types of scripts/build.js (plain JavaScript: it runs before anything is compiled). */
export interface BuildResult {
  /** The build dist/ points at (.dist/<id>). */
  id: string | undefined;
  /** Whether this call compiled (false: dist/ was already a build of these sources). */
  built: boolean;
  ms: number;
}
export function ensureBuild(opts?: { root?: string; ifStale?: boolean }): Promise<BuildResult>;
export function isFresh(root: string): boolean;
