import type { Knex } from 'knex';
import { dialectOf } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import { toIsoRequired } from '../platform/time';

/** The Knex queries of event delivery. Rules live in service.ts and worker.ts. */

export interface EndpointRow {
  id: string;
  site_id: string;
  url: string;
  events: string; // comma-separated, as the outbox reads it
  secret_encrypted: string;
  created_at: number;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryRow {
  event_id: string;
  site_id: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempts: number;
  round_base: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  updated_at: number;
}

export interface EventRow {
  id: string;
  site_id: string;
  name: string;
  body: string;
  created_at: number;
}

export interface AttemptLog {
  event_id: string;
  site_id: string;
  endpoint_id: string;
  event_name: string;
  attempt: number;
  url: string;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
}

/** What the worker must do with a claimed row. */
export interface Claimed {
  delivery: DeliveryRow;
  /** The attempt number this claim sends (already counted in `attempts`). */
  attempt: number;
  /** A previous claim never reported back: its worker stopped mid-attempt. */
  interrupted: { attempt: number; startedAt: number; leaseUntil: number } | null;
  /** The round's budget was used up by interrupted attempts: give up instead of sending. */
  exhausted: boolean;
}

/** The log text of an attempt whose worker stopped (or lost its lease) before reporting back. */
export const INTERRUPTED = 'interrupted: the worker stopped during the attempt';

const num = (v: unknown) => Number(v);
const numOrNull = (v: unknown) => (v === null || v === undefined ? null : Number(v));

function deliveryFromDb(r: Record<string, unknown>): DeliveryRow {
  return {
    event_id: String(r.event_id),
    site_id: String(r.site_id),
    endpoint_id: String(r.endpoint_id),
    status: r.status as DeliveryStatus,
    attempts: num(r.attempts),
    round_base: num(r.round_base),
    next_attempt_at: num(r.next_attempt_at),
    lease_owner: (r.lease_owner as string | null) ?? null,
    lease_until: numOrNull(r.lease_until),
    updated_at: num(r.updated_at),
  };
}

export function createEventStore(db: Knex) {
  const mysql = dialectOf(db) === 'mysql';

  return {
    async findEndpoint(siteId: string): Promise<EndpointRow | undefined> {
      return db<EndpointRow>('webhook_endpoints').where({ site_id: siteId }).first();
    },

    async insertEndpoint(row: EndpointRow): Promise<void> {
      await db('webhook_endpoints').insert(row);
    },

    async updateEndpoint(id: string, fields: Partial<Pick<EndpointRow, 'url' | 'events' | 'secret_encrypted' | 'updated_at'>>): Promise<void> {
      await db('webhook_endpoints').where({ id }).update(fields);
    },

    async findEvent(id: string): Promise<EventRow | undefined> {
      const r = await db('events').where({ id }).first();
      return r ? { ...r, created_at: num(r.created_at) } : undefined;
    },

    /**
     * Claims up to `limit` due deliveries for `owner`: each gets one more attempt counted and a
     * lease (next_attempt_at moves to the lease's end, so if this worker dies the row is due again
     * then). On MySQL the candidates are locked with SKIP LOCKED, so concurrent workers take
     * different rows without waiting on each other; the UPDATE is conditional on what was read, so
     * on SQLite (no row locks) a row can still be claimed by one worker only. The rows in
     * `exclude` are left alone even when their lease ran out: they are this worker's own attempts
     * still in flight (a stalled database or a slow receiver outlasted the lease), and claiming them
     * again would send the event a second time alongside the first.
     */
    async claimDue(opts: {
      owner: string;
      now: number;
      leaseMs: number;
      limit: number;
      maxAttempts: number;
      /** Deliveries this worker has in flight per endpoint, and the most it takes per endpoint. */
      inFlight: Map<string, number>;
      perEndpoint: number;
      /** Event ids this worker is still sending. */
      exclude?: Iterable<string>;
    }): Promise<{ claimed: Claimed[]; skipped: number }> {
      const { owner, now, leaseMs, limit, maxAttempts, perEndpoint } = opts;
      if (limit <= 0) return { claimed: [], skipped: 0 };
      const busy = new Map(opts.inFlight);
      const full = [...busy].filter(([, n]) => n >= perEndpoint).map(([id]) => id);
      const own = [...(opts.exclude ?? [])];
      const work = async (q: Knex | Knex.Transaction) => {
        let select = q('deliveries').where('status', 'pending').andWhere('next_attempt_at', '<=', now).orderBy('next_attempt_at').limit(limit);
        if (full.length) select = select.whereNotIn('endpoint_id', full);
        if (own.length) select = select.whereNotIn('event_id', own);
        if (mysql) select = select.forUpdate().skipLocked();
        const rows = (await select).map(deliveryFromDb);
        const claimed: Claimed[] = [];
        let skipped = 0;
        for (const row of rows) {
          const n = busy.get(row.endpoint_id) ?? 0;
          if (n >= perEndpoint) {
            skipped++; // left for a later round, when that address has room again
            continue;
          }
          const exhausted = row.attempts - row.round_base >= maxAttempts;
          const attempts = exhausted ? row.attempts : row.attempts + 1;
          const updated = await q('deliveries')
            .where({ event_id: row.event_id, status: 'pending', attempts: row.attempts })
            .andWhere('next_attempt_at', '<=', now)
            .update({ attempts, lease_owner: owner, lease_until: now + leaseMs, next_attempt_at: now + leaseMs, updated_at: now });
          if (updated !== 1) continue; // another worker was faster
          busy.set(row.endpoint_id, n + 1);
          claimed.push({
            delivery: { ...row, attempts, lease_owner: owner, lease_until: now + leaseMs, next_attempt_at: now + leaseMs, updated_at: now },
            attempt: attempts,
            interrupted: row.lease_owner ? { attempt: row.attempts, startedAt: row.updated_at, leaseUntil: row.lease_until ?? now } : null,
            exhausted,
          });
        }
        return { claimed, skipped };
      };
      if (!mysql) return work(db);
      // READ COMMITTED: the locking read takes no gap locks, so it never holds up the outbox inserts
      // of new deliveries while it runs.
      for (let i = 1; ; i++) {
        try {
          return await db.transaction(work, { isolationLevel: 'read committed' });
        } catch (err) {
          if (i >= 4 || (err as { code?: string }).code !== 'ER_LOCK_DEADLOCK') throw err;
        }
      }
    },

    async loadForDelivery(eventId: string, endpointId: string): Promise<{ event: EventRow | undefined; endpoint: EndpointRow | undefined }> {
      const [event, endpoint] = await Promise.all([
        db('events').where({ id: eventId }).first(),
        db<EndpointRow>('webhook_endpoints').where({ id: endpointId }).first(),
      ]);
      return { event, endpoint };
    },

    /**
     * Records the end of an attempt: its row in the log and the delivery's new state, in one commit.
     * The state changes only while the row is still this claim's: leased by `owner` AND at the
     * attempt number the claim sent. A lease that ran out may have been taken by another worker,
     * which may have finished and released it and been followed by a newer claim (even this
     * worker's own); the owner alone cannot tell those apart, the attempt number can. A stale
     * result changes nothing (returns false), but the attempt did happen, so its row is logged,
     * replacing the `interrupted` placeholder a later claim wrote for it.
     */
    async finishAttempt(
      row: AttemptLog | null,
      eventId: string,
      claim: { owner: string; attempt: number },
      next: { status: DeliveryStatus; nextAttemptAt: number; now: number },
    ): Promise<boolean> {
      return runInTransaction(db, async (trx) => {
        const n = await trx('deliveries')
          .where({ event_id: eventId, lease_owner: claim.owner, attempts: claim.attempt })
          .update({ status: next.status, next_attempt_at: next.nextAttemptAt, lease_owner: null, lease_until: null, updated_at: next.now });
        if (row) {
          if (n === 0) await trx('delivery_attempts').where({ event_id: eventId, attempt: row.attempt }).andWhere('error', INTERRUPTED).del();
          await trx('delivery_attempts').insert(row);
        }
        return n === 1;
      });
    },

    /**
     * Logs an attempt whose worker never reported back (found by the claim that took its expired
     * lease), unless that worker's real result is in the log already: it may have been late, not dead.
     */
    async logInterrupted(row: Omit<AttemptLog, 'error' | 'status_code' | 'response_excerpt'>): Promise<void> {
      await runInTransaction(db, async (trx) => {
        const known = await trx('delivery_attempts').where({ event_id: row.event_id, attempt: row.attempt }).first('id');
        if (!known) await trx('delivery_attempts').insert({ ...row, status_code: null, error: INTERRUPTED, response_excerpt: null });
      });
    },

    /**
     * Puts an event back to pending with a fresh attempt budget (attempt numbers continue). A row
     * that a worker is sending right now is left alone: it is being delivered already.
     */
    async resetForRedelivery(event: EventRow, endpointId: string, now: number): Promise<boolean> {
      return runInTransaction(db, async (trx) => {
        let q = trx('deliveries').where({ event_id: event.id });
        if (mysql) q = q.forUpdate();
        const current = await q.first();
        if (!current) {
          await trx('deliveries').insert({
            event_id: event.id,
            site_id: event.site_id,
            endpoint_id: endpointId,
            status: 'pending',
            attempts: 0,
            round_base: 0,
            next_attempt_at: now,
            lease_owner: null,
            lease_until: null,
            updated_at: now,
          });
          return true;
        }
        const row = deliveryFromDb(current);
        if (row.status === 'pending' && row.lease_owner && (row.lease_until ?? 0) > now) return false;
        await trx('deliveries')
          .where({ event_id: event.id })
          .update({ status: 'pending', endpoint_id: endpointId, round_base: row.attempts, next_attempt_at: now, updated_at: now });
        return true;
      });
    },

    /** Events of a site created at or after `since` whose delivery ended failed. */
    async failedEventsSince(siteId: string, since: number): Promise<EventRow[]> {
      const rows = await db('deliveries as d')
        .join('events as e', 'e.id', 'd.event_id')
        .where({ 'd.site_id': siteId, 'd.status': 'failed' })
        .andWhere('e.created_at', '>=', since)
        .orderBy('e.created_at')
        .select('e.*');
      return rows.map((r) => ({ ...r, created_at: num(r.created_at) }));
    },

    /** The delivery log of a site, newest first. */
    async listAttempts(siteId: string, filter: { eventId?: string; eventName?: string; failedOnly?: boolean; limit: number }) {
      let q = db('delivery_attempts as a')
        .leftJoin('deliveries as d', 'd.event_id', 'a.event_id')
        .where('a.site_id', siteId)
        .orderBy([
          { column: 'a.started_at', order: 'desc' },
          { column: 'a.id', order: 'desc' },
        ])
        .limit(filter.limit)
        .select('a.*', 'd.status as delivery_status');
      if (filter.eventId) q = q.andWhere('a.event_id', filter.eventId);
      if (filter.eventName) q = q.andWhere('a.event_name', filter.eventName);
      if (filter.failedOnly) q = q.andWhere((w) => w.whereNull('a.status_code').orWhere('a.status_code', '<', 200).orWhere('a.status_code', '>=', 300));
      const rows = await q;
      return rows.map((r) => ({
        eventId: String(r.event_id),
        event: String(r.event_name),
        attempt: num(r.attempt),
        url: String(r.url),
        startedAt: toIsoRequired(r.started_at),
        durationMs: num(r.duration_ms),
        status: numOrNull(r.status_code),
        error: (r.error as string | null) ?? null,
        response: (r.response_excerpt as string | null) ?? null,
        deliveryStatus: (r.delivery_status as DeliveryStatus | null) ?? null,
      }));
    },

    /**
     * The 30-day retention: attempt rows, finished deliveries and the events nobody can redeliver
     * any more. In small batches, so a large backlog never holds long locks.
     */
    async removeOlderThan(cutoff: number, batch = 500): Promise<{ attempts: number; deliveries: number; events: number }> {
      const removed = { attempts: 0, deliveries: 0, events: 0 };
      const drain = async (pick: () => Promise<unknown[]>, remove: (ids: unknown[]) => Promise<number>) => {
        let total = 0;
        for (;;) {
          const ids = await pick();
          if (ids.length === 0) return total;
          total += await remove(ids);
          if (ids.length < batch) return total;
        }
      };
      removed.attempts = await drain(
        async () => (await db('delivery_attempts').where('started_at', '<', cutoff).limit(batch).select('id')).map((r) => r.id),
        (ids) => db('delivery_attempts').whereIn('id', ids as number[]).del(),
      );
      removed.deliveries = await drain(
        async () =>
          (await db('deliveries').whereIn('status', ['delivered', 'failed']).andWhere('updated_at', '<', cutoff).limit(batch).select('event_id')).map((r) => r.event_id),
        (ids) => db('deliveries').whereIn('event_id', ids as string[]).whereIn('status', ['delivered', 'failed']).del(),
      );
      removed.events = await drain(
        async () =>
          (
            await db('events as e')
              .where('e.created_at', '<', cutoff)
              .whereNotExists(db('deliveries as d').whereRaw('d.event_id = e.id').select(db.raw('1')))
              .limit(batch)
              .select('e.id')
          ).map((r) => r.id),
        (ids) => db('events').whereIn('id', ids as string[]).whereNotExists(db('deliveries as d').whereRaw('d.event_id = events.id').select(db.raw('1'))).del(),
      );
      return removed;
    },
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
