import type { Knex } from 'knex';
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../platform/crypto';
import { ApiError } from '../platform/errors';
import { isUniqueViolation } from '../db/knex';
import { afterCommit } from '../db/transaction';
import { newId } from '../platform/ids';
import type { IdempotencyStore, ReplayRow } from './store';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/**
 * The lease of a running request. It is renewed every third of it while the request runs, so only
 * a request whose process died (crash, kill) or could not reach the database for this long loses
 * its key to a repeat.
 */
export const IDEMPOTENCY_LOCK_MS = 60 * 1000;
/**
 * Renewals stop after this long, so a request stuck for good cannot hold its key forever. Far beyond
 * anything a request takes (HTTP_REQUEST_TIMEOUT_MS is 300 s by default, a MySQL lock wait 10 s a try).
 */
export const IDEMPOTENCY_MAX_HOLD_MS = 15 * 60 * 1000;

/** `replay` carries what a replay's record needs: the key's fingerprint and when its record was made. */
/** How long replay notes wait to be written together, and how many are written at once at most. */
export const REPLAY_NOTE_FLUSH_MS = 200;
export const REPLAY_NOTE_BATCH = 200;

export type Begin =
  { kind: 'proceed'; handle: IdempotencyHandle } | { kind: 'replay'; status: number; body: string; keyFingerprint: string; keyCreatedAt: number };

/** Where a replay shows: the conversation of the site, and whose key it was. */
export interface ReplayScope {
  siteId: string;
  conversationId: string;
  apiKeyId: string | null;
  accountId: string | null;
}

/**
 * The key as the timeline shows it: the first 16 hex digits of its SHA-256. The key is chosen by
 * the client and may carry anything (an order number, an email); a client finds its own by hashing.
 */
export const keyFingerprint = (keyHash: string) => keyHash.slice(0, 16);

export interface IdempotencyHandle {
  /**
   * Records the answer inside the transaction that made the change: both commit or neither. Throws
   * 409 `idempotency_key_in_use` when the lease was taken over by a repeat (this request ran past
   * its lease), so the transaction rolls back and only the repeat's change exists.
   * The transaction must be one runInTransaction opened (the answer is known committed after it).
   */
  completeIn(trx: Knex.Transaction, status: number, body: unknown): Promise<void>;
  /**
   * Called with every answer; stops renewing the lease. A record committed by completeIn, or taken
   * over by a repeat, stays as it is. Otherwise a 4xx is recorded (and replayed later), and a 5xx
   * forgets the key so a retry runs again; this also covers a transaction that wrote the record and
   * then failed to commit.
   */
  finish(status: number, body: unknown): Promise<void>;
}

/**
 * Idempotency-Key as openapi/openapi.yaml declares it: scoped to the access key, remembered 24 hours; a repeat replays
 * the first answer; a repeat while the first runs is 409; the same key with another request is 422.
 */
export function createIdempotencyService(
  store: IdempotencyStore,
  now: () => number = Date.now,
  opts: { lockMs?: number; maxHoldMs?: number; noteFlushMs?: number; noteBatch?: number; onNoteError?: (err: unknown, dropped: number) => void } = {},
) {
  const lockMs = opts.lockMs ?? IDEMPOTENCY_LOCK_MS;
  const maxHoldMs = opts.maxHoldMs ?? IDEMPOTENCY_MAX_HOLD_MS;
  const noteFlushMs = opts.noteFlushMs ?? REPLAY_NOTE_FLUSH_MS;
  const noteBatch = opts.noteBatch ?? REPLAY_NOTE_BATCH;
  let pending: ReplayRow[] = [];
  let noteTimer: NodeJS.Timeout | null = null;
  return {
    async begin(apiKeyId: string, idempotencyKey: string, requestHash: string): Promise<Begin> {
      const keyHash = sha256Hex(idempotencyKey);
      for (let attempt = 0; attempt < 3; attempt++) {
        const t = now();
        const token = randomBytes(16).toString('hex');
        try {
          await store.insert({
            api_key_id: apiKeyId,
            key_hash: keyHash,
            request_hash: requestHash,
            state: 'running',
            response_status: null,
            response_body: null,
            created_at: t,
            locked_until: t + lockMs,
            lease_token: token,
          });
          return { kind: 'proceed', handle: handle(apiKeyId, keyHash, token) };
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
        if (existing.state === 'done')
          return {
            kind: 'replay',
            status: existing.response_status!,
            body: existing.response_body!,
            keyFingerprint: keyFingerprint(keyHash),
            keyCreatedAt: existing.created_at,
          };
        if (existing.locked_until < t && (await store.takeOver(apiKeyId, keyHash, existing.locked_until, t + lockMs, token))) {
          return { kind: 'proceed', handle: handle(apiKeyId, keyHash, token) };
        }
        throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry in a moment.');
      }
      throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry in a moment.');
    },

    purgeExpired: () => store.removeExpired(now() - IDEMPOTENCY_TTL_MS),

    /**
     * Notes a replay for the conversation's timeline, without a write of its own: notes are kept
     * for up to REPLAY_NOTE_FLUSH_MS (or REPLAY_NOTE_BATCH of them) and written in one insert, so
     * a burst of retries costs one commit (on MariaDB, a log flush of several ms) rather than one
     * each, and no replay waits for one. The message is read from the stored answer (`{data:
     * message}` of a reply); an error answer has none.
     */
    noteReplay(scope: ReplayScope, replay: Extract<Begin, { kind: 'replay' }>): void {
      let messageId: string | null = null;
      if (replay.status >= 200 && replay.status < 300) {
        try {
          const id = (JSON.parse(replay.body) as { data?: { id?: unknown } }).data?.id;
          if (typeof id === 'string' && /^msg_[0-9a-hjkmnp-tv-z]{26}$/.test(id)) messageId = id;
        } catch {
          // not JSON: no message to name
        }
      }
      const at = now();
      pending.push({
        id: newId('rpl', at),
        site_id: scope.siteId,
        conversation_id: scope.conversationId,
        message_id: messageId,
        status: replay.status,
        api_key_id: scope.apiKeyId,
        account_id: scope.accountId,
        key_fingerprint: replay.keyFingerprint,
        key_created_at: replay.keyCreatedAt,
        replayed_at: at,
      });
      if (pending.length >= noteBatch) void flushReplayNotes();
      else if (!noteTimer) {
        noteTimer = setTimeout(() => void flushReplayNotes(), noteFlushMs);
        noteTimer.unref(); // a stop writes what is left through flushReplayNotes
      }
    },

    /** Writes the notes kept so far (the timer does; a stop calls it last). Notes that cannot be written are dropped. */
    flushReplayNotes,
  };

  async function flushReplayNotes(): Promise<void> {
    if (noteTimer) clearTimeout(noteTimer);
    noteTimer = null;
    const rows = pending;
    pending = [];
    if (!rows.length) return;
    try {
      await store.insertReplays(rows);
    } catch (err) {
      // Diagnostics only: the replays were answered; the timeline is short of these entries.
      opts.onNoteError?.(err, rows.length);
    }
  }

  function handle(apiKeyId: string, keyHash: string, token: string): IdempotencyHandle {
    let finished = false;
    /** The status the request's own transaction recorded, once that transaction has committed. */
    let committedStatus: number | undefined;
    const heartbeat = keepLeaseAlive(apiKeyId, keyHash, token);
    return {
      async completeIn(trx, status, body) {
        afterCommit(trx, () => (committedStatus = status));
        if (!(await store.complete(apiKeyId, keyHash, token, status, JSON.stringify(body), trx))) {
          // Committing now would make a second change under the key: a repeat took it over while this
          // request ran past its lease. 409 rather than the repeat's answer: that repeat may still be
          // running; a retry (the SDK retries this code) gets its answer replayed once it is done.
          throw new ApiError(
            'idempotency_key_in_use',
            'Another request with this Idempotency-Key took over while this one was running; nothing was changed. Retry to get its answer.',
          );
        }
      },
      async finish(status, body) {
        if (finished) return;
        finished = true;
        heartbeat.stop();
        // The record is already `done` with this answer (the statement below would match no row): a
        // round trip saved before the answer is sent.
        if (status === committedStatus) return;
        // Both statements only touch a record still `running` under this request's lease: one the
        // request's transaction committed as `done`, or one a repeat took over, is left alone.
        if (status >= 500) await store.removeRunning(apiKeyId, keyHash, token);
        else await store.completeRunning(apiKeyId, keyHash, token, status, JSON.stringify(body));
      },
    };
  }

  /**
   * Renews the lease every third of it until the request finishes, loses the lease, or has held it
   * for maxHoldMs. A renewal that fails (database briefly unreachable) is tried again on the next
   * beat: the lease has two thirds left.
   */
  function keepLeaseAlive(apiKeyId: string, keyHash: string, token: string) {
    const since = now();
    let renewing = false;
    const timer = setInterval(
      async () => {
        if (renewing) return;
        if (now() - since > maxHoldMs) return clearInterval(timer);
        renewing = true;
        try {
          if (!(await store.renew(apiKeyId, keyHash, token, now() + lockMs))) clearInterval(timer);
        } catch {
          // next beat
        } finally {
          renewing = false;
        }
      },
      Math.max(1, Math.floor(lockMs / 3)),
    );
    timer.unref(); // never what keeps a process from exiting
    return { stop: () => clearInterval(timer) };
  }
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
