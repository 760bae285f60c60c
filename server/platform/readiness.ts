import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import { migrationSource } from '../db/migrations';
import type { BlobStore } from '../media/blob-store';
import { NEWER_MIGRATIONS_ALLOWED } from '../db/knex';

/** Each dependency /readyz checks: `ok`, or what is wrong with it in a few words (never a secret). */
export type Readiness = Record<string, string>;

export const READY = 'ok';

/** How long /readyz waits for the media store's answer. */
export const MEDIA_STORE_CHECK_MS = 1500;

/**
 * Whether this instance can serve: the database answers, it has every migration this code knows
 * (an instance of an older release shares it, or a rollback ran; migrations of a newer release beyond
 * them are fine: each is safe with the release before it), and Redis answers when REDIS_URL
 * is set (without it rate limits and live updates are this instance's own), and the media store
 * answers when MEDIA_STORE=s3 (`mediaStore`: its bucket exists and lets us in). Errors are summarised by
 * their code: a driver's message can name hosts and users.
 */
export async function checkReadiness(deps: { db: Knex; redis?: Redis; blobs?: BlobStore }): Promise<Readiness> {
  const out: Readiness = {};
  const [database, redis, mediaStore] = await Promise.all([
    deps.db.migrate.list({ migrationSource, ...NEWER_MIGRATIONS_ALLOWED }).then(
      ([, pending]: [unknown[], unknown[]]) => ({ database: READY, migrations: pending.length ? `${pending.length} pending: run npm run db:migrate` : READY }),
      (err: { code?: string }) => ({ database: `does not answer (${err.code ?? 'error'})`, migrations: 'unknown' }),
    ),
    deps.redis?.ping().then(
      () => READY,
      (err: { code?: string; name?: string }) => `does not answer (${err.code ?? err.name ?? 'error'})`,
    ),
    // Within the probe's own 2 s (app.ts), so a bucket that hangs is reported as itself, not as the database.
    deps.blobs?.kind === 's3' ? deps.blobs.check(MEDIA_STORE_CHECK_MS) : undefined,
  ]);
  Object.assign(out, database);
  if (redis !== undefined) out.redis = redis;
  if (mediaStore !== undefined) out.mediaStore = mediaStore;
  return out;
}
