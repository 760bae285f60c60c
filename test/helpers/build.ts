/**
 * jest's globalSetup: the servers the tests make (supertest, tsx) read the chat window's files from
 * the current build, dist/, as the compiled server reads its own. Built here when the sources
 * changed since it, exactly as `npm start` would (scripts/build.js --if-stale).
 */
import { ensureBuild } from '../../scripts/build';

export default async function ensureBuilt(): Promise<void> {
  await ensureBuild({ ifStale: true });
}
