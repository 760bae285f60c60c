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
  /** Whose lease this is: only the request holding this token may record the answer. */
  lease_token: string | null;
}

/** One replay of a recorded answer (013_idempotency_replays.ts), for the conversation's timeline. */
export interface ReplayRow {
  id: string;
  site_id: string;
  conversation_id: string;
  message_id: string | null;
  status: number;
  api_key_id: string | null;
  account_id: string | null;
  key_fingerprint: string;
  key_created_at: number;
  replayed_at: number;
}

export function createIdempotencyStore(db: Knex) {
  const where = (apiKeyId: string, keyHash: string) => ({ api_key_id: apiKeyId, key_hash: keyHash });
  /** The record as long as it is still running under this request's lease. */
  const leased = (apiKeyId: string, keyHash: string, token: string) => ({ ...where(apiKeyId, keyHash), state: 'running', lease_token: token });
  return {
    insert: (row: IdempotencyRow) => db('idempotency_keys').insert(row),
    async find(apiKeyId: string, keyHash: string): Promise<IdempotencyRow | undefined> {
      const row = await db<IdempotencyRow>('idempotency_keys').where(where(apiKeyId, keyHash)).first();
      return row && { ...row, created_at: Number(row.created_at), locked_until: Number(row.locked_until) };
    },
    /** Compare-and-set on the lease, so only one request takes over an abandoned key. */
    async takeOver(apiKeyId: string, keyHash: string, previousLock: number, newLock: number, token: string): Promise<boolean> {
      const n = await db('idempotency_keys')
        .where({ ...where(apiKeyId, keyHash), state: 'running', locked_until: previousLock })
        .update({ locked_until: newLock, lease_token: token });
      return Number(n) === 1;
    },
    /** Extends the lease of a request still running; false once it lost the lease or finished. */
    async renew(apiKeyId: string, keyHash: string, token: string, newLock: number): Promise<boolean> {
      const n = await db('idempotency_keys')
        .where(leased(apiKeyId, keyHash, token))
        .update({ locked_until: newLock });
      return Number(n) === 1;
    },
    /** Records the answer inside the request's transaction; false when the lease is no longer ours. */
    async complete(apiKeyId: string, keyHash: string, token: string, status: number, body: string, trx: Knex = db): Promise<boolean> {
      const n = await trx('idempotency_keys')
        .where(leased(apiKeyId, keyHash, token))
        .update({ state: 'done', response_status: status, response_body: body });
      return Number(n) === 1;
    },
    /** Forgets a key whose request did not finish; a record committed by the request's own transaction, or another request's lease, stays. */
    removeRunning: (apiKeyId: string, keyHash: string, token: string) =>
      db('idempotency_keys')
        .where(leased(apiKeyId, keyHash, token))
        .delete(),
    completeRunning: (apiKeyId: string, keyHash: string, token: string, status: number, body: string) =>
      db('idempotency_keys')
        .where(leased(apiKeyId, keyHash, token))
        .update({ state: 'done', response_status: status, response_body: body }),
    /** Records and their replays past their time: a replay goes with its key's record. */
    async removeExpired(before: number) {
      const n = await db('idempotency_keys').where('created_at', '<', before).delete();
      await db('idempotency_replays').where('key_created_at', '<', before).delete();
      return n;
    },
    insertReplays: (rows: ReplayRow[]) => db('idempotency_replays').insert(rows),
    /** A conversation's replays from `from` to `to` (ms, both included), oldest first, at most `limit`. */
    async replaysOfConversation(siteId: string, conversationId: string, from: number, to: number, limit: number): Promise<ReplayRow[]> {
      const rows: ReplayRow[] = await db('idempotency_replays')
        .where({ conversation_id: conversationId, site_id: siteId })
        .andWhere('replayed_at', '>=', from)
        .andWhere('replayed_at', '<=', to)
        .orderBy([
          { column: 'replayed_at', order: 'asc' },
          { column: 'id', order: 'asc' },
        ])
        .limit(limit)
        .select();
      return rows.map((r) => ({ ...r, status: Number(r.status), key_created_at: Number(r.key_created_at), replayed_at: Number(r.replayed_at) }));
    },
    /** Deleting a visitor's data: the replay rows of these conversations of the site. */
    removeForConversations: async (trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> =>
      conversationIds.length ? Number(await trx('idempotency_replays').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete()) : 0,

    async removeIfExpired(apiKeyId: string, keyHash: string, before: number) {
      await db('idempotency_keys').where(where(apiKeyId, keyHash)).andWhere('created_at', '<', before).delete();
    },
  };
}

export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
