import type { Knex } from 'knex';
import { sha256Hex } from '../platform/crypto';
import { ApiError } from '../platform/errors';
import { isUniqueViolation } from '../db/knex';
import type { IdempotencyStore } from './store';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** A first request that has not finished after this long is taken to have died (crash, kill). */
export const IDEMPOTENCY_LOCK_MS = 60 * 1000;

export type Begin =
  | { kind: 'proceed'; handle: IdempotencyHandle }
  | { kind: 'replay'; status: number; body: string };

export interface IdempotencyHandle {
  /** Records the answer inside the transaction that made the change: both commit or neither. */
  completeIn(trx: Knex, status: number, body: unknown): Promise<void>;
  /**
   * Called with every answer. A record committed by completeIn stays as it is. Otherwise a 4xx is
   * recorded (and replayed later), and a 5xx forgets the key so a retry runs again; this also
   * covers a transaction that wrote the record and then failed to commit.
   */
  finish(status: number, body: unknown): Promise<void>;
}

/**
 * Idempotency-Key as in DECISIONS: scoped to the access key, remembered 24 hours; a repeat replays
 * the first answer; a repeat while the first runs is 409; the same key with another request is 422.
 */
export function createIdempotencyService(store: IdempotencyStore, now: () => number = Date.now) {
  return {
    async begin(apiKeyId: string, idempotencyKey: string, requestHash: string): Promise<Begin> {
      const keyHash = sha256Hex(idempotencyKey);
      for (let attempt = 0; attempt < 3; attempt++) {
        const t = now();
        try {
          await store.insert({
            api_key_id: apiKeyId,
            key_hash: keyHash,
            request_hash: requestHash,
            state: 'running',
            response_status: null,
            response_body: null,
            created_at: t,
            locked_until: t + IDEMPOTENCY_LOCK_MS,
          });
          return { kind: 'proceed', handle: handle(apiKeyId, keyHash) };
        } catch (err) {
          if (!isUniqueViolation(err)) throw err;
        }
        const existing = await store.find(apiKeyId, keyHash);
        if (!existing) continue; // forgotten between our insert and our read: try again
        if (existing.created_at < t - IDEMPOTENCY_TTL_MS) {
          await store.removeIfExpired(apiKeyId, keyHash, t - IDEMPOTENCY_TTL_MS);
          continue;
        }
        if (existing.request_hash !== requestHash) {
          throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request.');
        }
        if (existing.state === 'done') return { kind: 'replay', status: existing.response_status!, body: existing.response_body! };
        if (existing.locked_until < t && (await store.takeOver(apiKeyId, keyHash, existing.locked_until, t + IDEMPOTENCY_LOCK_MS))) {
          return { kind: 'proceed', handle: handle(apiKeyId, keyHash) };
        }
        throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry in a moment.');
      }
      throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry in a moment.');
    },

    purgeExpired: () => store.removeExpired(now() - IDEMPOTENCY_TTL_MS),
  };

  function handle(apiKeyId: string, keyHash: string): IdempotencyHandle {
    let finished = false;
    return {
      async completeIn(trx, status, body) {
        await store.complete(apiKeyId, keyHash, status, JSON.stringify(body), trx);
      },
      async finish(status, body) {
        if (finished) return;
        finished = true;
        // Both statements only touch a record still `running`: one the request's transaction
        // committed as `done` is never overwritten or forgotten.
        if (status >= 500) await store.removeRunning(apiKeyId, keyHash);
        else await store.completeRunning(apiKeyId, keyHash, status, JSON.stringify(body));
      },
    };
  }
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
