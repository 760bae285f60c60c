import type { Knex } from 'knex';

export interface IdempotencyRow {
  api_key_id: string;
  key_hash: string;
  request_hash: string;
  state: 'running' | 'done';
  response_status: number | null;
  response_body: string | null;
  created_at: number;
  locked_until: number;
}

export function createIdempotencyStore(db: Knex) {
  const where = (apiKeyId: string, keyHash: string) => ({ api_key_id: apiKeyId, key_hash: keyHash });
  return {
    insert: (row: IdempotencyRow) => db('idempotency_keys').insert(row),
    async find(apiKeyId: string, keyHash: string): Promise<IdempotencyRow | undefined> {
      const row = await db<IdempotencyRow>('idempotency_keys').where(where(apiKeyId, keyHash)).first();
      return row && { ...row, created_at: Number(row.created_at), locked_until: Number(row.locked_until) };
    },
    /** Compare-and-set on the lease, so only one request takes over an abandoned key. */
    async takeOver(apiKeyId: string, keyHash: string, previousLock: number, newLock: number): Promise<boolean> {
      const n = await db('idempotency_keys')
        .where({ ...where(apiKeyId, keyHash), state: 'running', locked_until: previousLock })
        .update({ locked_until: newLock });
      return Number(n) === 1;
    },
    complete: (apiKeyId: string, keyHash: string, status: number, body: string, trx: Knex = db) =>
      trx('idempotency_keys').where(where(apiKeyId, keyHash)).update({ state: 'done', response_status: status, response_body: body }),
    /** Forgets a key whose request did not finish; a record committed by the request's own transaction stays. */
    removeRunning: (apiKeyId: string, keyHash: string) => db('idempotency_keys').where({ ...where(apiKeyId, keyHash), state: 'running' }).delete(),
    completeRunning: (apiKeyId: string, keyHash: string, status: number, body: string) =>
      db('idempotency_keys').where({ ...where(apiKeyId, keyHash), state: 'running' }).update({ state: 'done', response_status: status, response_body: body }),
    removeExpired: (before: number) => db('idempotency_keys').where('created_at', '<', before).delete(),
    async removeIfExpired(apiKeyId: string, keyHash: string, before: number) {
      await db('idempotency_keys').where(where(apiKeyId, keyHash)).andWhere('created_at', '<', before).delete();
    },
  };
}

export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
