import type { Knex } from 'knex';
import { forUpdate, forUpdateSkipLocked } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import { precompiledInsert } from '../db/precompiled';
import { toIsoRequired } from '../platform/time';
import type { EventName } from './event-names';
import { addressesLeftOut, takeWithinAllowance } from '../delivery/scheduler';
import { createLogQueries } from './log-store';
import type { ClaimRequest, NextState } from '../delivery/engine';
import { claimChanges, claimedState, pendingState } from '../delivery/rows';
import {
  ATTEMPT_COLUMNS,
  AttemptRow,
  DeliveryRow,
  DeliveryStatus,
  EndpointRow,
  EventRow,
  ListedAttempt,
  mapAttemptRow,
  mapDeliveryRow,
  mapEndpointRow,
  mapEventRow,
} from './rows';

export * from './rows';

/**
 * The Knex queries of event delivery: `webhook_endpoints`, `events`, `deliveries` and
 * `delivery_attempts` are read and written here and nowhere else. The rules live in service.ts
 * (addresses, secrets, redelivery), outbox.ts (what an event says, whether it is delivered) and
 * worker.ts (attempts).
 *
 * Row mapping (rows.ts), as in conversations/store.ts and access/store.ts: each row type has one `map…Row`,
 * applied to every row read, that turns what the driver returns into the row type (mysql2 may hand
 * BIGINT back as a string); a row type the API or the CLI shows has its one `…ToDto` beside it.
 * The store returns rows; services turn them into what they answer with the `…ToDto`.
 */

/** What the worker must do with a claimed row. */
export interface Claimed {
  delivery: DeliveryRow;
  /** The attempt number this claim sends (already counted in `attempts`). */
  attempt: number;
  /** A previous claim never reported back: its worker stopped mid-attempt. */
  interrupted: { attempt: number; startedAt: number; leaseUntil: number } | null;
  /** The round's budget was used up by interrupted attempts: give up instead of sending. */
  exhausted: boolean;
  /** What the attempt sends, and where; undefined when it was removed meanwhile (the delivery then fails). */
  event: EventRow | undefined;
  endpoint: EndpointRow | undefined;
}

export type { NextState } from '../delivery/engine';

/** One claim's result for finishAttempts: its log row (none when nothing was sent) and the next state. */
export interface Outcome {
  eventId: string;
  /** The attempt number the claim sent. */
  attempt: number;
  row: AttemptRow | null;
  next: NextState;
}

/** A group of results of which some claim is no longer the owner's: recorded one by one instead. */
class PartialGroup extends Error {}

const DELIVERY_COLUMNS = [
  'event_id',
  'site_id',
  'endpoint_id',
  'status',
  'attempts',
  'round_base',
  'next_attempt_at',
  'lease_owner',
  'lease_until',
  'updated_at',
] as const;
/** The event ids of these rows that this claim holds (its lease): read back only when the claim's UPDATE took fewer than it locked. */
async function claimedBack(q: Knex.Transaction, ids: string[], owner: string, leaseUntil: number): Promise<Set<string>> {
  const rows: { event_id: string }[] = await q('deliveries')
    .whereIn('event_id', ids)
    .andWhere({ lease_owner: owner, lease_until: leaseUntil })
    .select('event_id');
  return new Set(rows.map((r) => r.event_id));
}

/** Results that move their deliveries the same way (all but the times), each group in claim order. */
function byNextState(results: Outcome[]): Outcome[][] {
  const parts = new Map<string, Outcome[]>();
  for (const r of results) {
    const key = JSON.stringify([r.next.status, r.attempt, r.next.attempts ?? r.attempt, r.next.unsentReason ?? null]);
    const part = parts.get(key);
    if (part) part.push(r);
    else parts.set(key, [r]);
  }
  return [...parts.values()];
}

const ATTEMPT_VALUES = `(${ATTEMPT_COLUMNS.map(() => '?').join(', ')})`;

/**
 * Log rows of one group of results in one INSERT, written as SQL both engines take rather than
 * through Knex's builder, which walked every value of every row (a few hundred a group) to build it.
 */
async function insertAttemptRows(trx: Knex.Transaction, rows: AttemptRow[]): Promise<void> {
  const values: Knex.RawBinding[] = [];
  for (const row of rows) for (const c of ATTEMPT_COLUMNS) values.push(row[c] ?? null);
  await trx.raw(`INSERT INTO delivery_attempts (${ATTEMPT_COLUMNS.join(', ')}) VALUES ${rows.map(() => ATTEMPT_VALUES).join(', ')}`, values);
}

/** finishAttempt's rule for one claim, in the caller's transaction. */
async function finishOne(
  trx: Knex.Transaction,
  r: { row: AttemptRow | null; eventId: string; claim: { owner: string; attempt: number }; next: NextState },
): Promise<boolean> {
  const { row, eventId, claim, next } = r;
  const n = await trx('deliveries')
    .where({ event_id: eventId, lease_owner: claim.owner, attempts: claim.attempt })
    .update({
      status: next.status,
      next_attempt_at: next.nextAttemptAt,
      attempts: next.attempts ?? claim.attempt,
      lease_owner: null,
      lease_until: null,
      updated_at: next.now,
      // A claimed row has no reason (redelivery clears it), so only an unsent end writes one.
      ...(next.unsentReason === undefined ? {} : { unsent_reason: next.unsentReason }),
    });
  if (row) {
    if (n === 0) await trx('delivery_attempts').where({ event_id: eventId, attempt: row.attempt }).andWhere('error', INTERRUPTED).del();
    await trx('delivery_attempts').insert(row);
  }
  return n === 1;
}

/** The log text of an attempt whose worker stopped (or lost its lease) before reporting back. */
export const INTERRUPTED = 'interrupted: the worker stopped during the attempt';

/** The events an address subscribes to, in the order they were saved. */
export function subscribedEvents(row: Pick<EndpointRow, 'events'>): EventName[] {
  return row.events.split(',') as EventName[];
}

/** A row of the delivery log as `webhook deliveries` prints it. */
export function attemptToDto(row: ListedAttempt) {
  return {
    eventId: row.event_id,
    event: row.event_name,
    attempt: row.attempt,
    url: row.url,
    startedAt: toIsoRequired(row.started_at),
    durationMs: row.duration_ms,
    status: row.status_code,
    error: row.error,
    response: row.response_excerpt,
    deliveryStatus: row.delivery_status,
  };
}

/*
 * The outbox's writes take the caller's transaction (the event commits if and only if the change
 * it describes does), so they are plain functions of the tables rather than of a store instance.
 */

const insertEventRow = precompiledInsert<EventRow>('events', ['id', 'site_id', 'name', 'body', 'created_at', 'conversation_id', 'message_id']);

export async function insertEvent(trx: Knex.Transaction, row: EventRow): Promise<void> {
  await insertEventRow(trx, row);
}

/** The site's event address (one per site), read in `db` or in the caller's transaction. */
export async function findEndpointOfSite(db: Knex, siteId: string): Promise<EndpointRow | undefined> {
  const r = await db('webhook_endpoints').where({ site_id: siteId }).first();
  return r && mapEndpointRow(r);
}

/** What writing an event needs of the site's event address: where its deliveries go and what it subscribes to. */
export type EventAddress = Pick<EndpointRow, 'id' | 'events'>;

/**
 * The site's event address as two columns of another statement (`event_address_id`,
 * `event_address_events`, null when the site has none), so a writer that reads a row of the site
 * anyway learns it in the same round trip. Scalar subqueries: inside a locking read (a
 * conversation locked FOR UPDATE) MariaDB reads them without locking, so an owner changing the
 * address never waits for a reply's commit.
 */
export function eventAddressColumns(db: Knex, siteId: string): Knex.Raw[] {
  return [
    db.raw('(SELECT id FROM webhook_endpoints WHERE site_id = ?) AS event_address_id', [siteId]),
    db.raw('(SELECT events FROM webhook_endpoints WHERE site_id = ?) AS event_address_events', [siteId]),
  ];
}

/** The address named by eventAddressColumns' columns of a row, or null when the site has none. */
export function eventAddressOf(row: { event_address_id?: string | null; event_address_events?: string | null }): EventAddress | null {
  return row.event_address_id && row.event_address_events !== null && row.event_address_events !== undefined
    ? { id: row.event_address_id, events: row.event_address_events }
    : null;
}

/** A delivery due now, with a fresh attempt budget. */
export async function insertPendingDelivery(
  trx: Knex.Transaction,
  delivery: Pick<DeliveryRow, 'event_id' | 'site_id' | 'endpoint_id'>,
  now: number,
): Promise<void> {
  const row: DeliveryRow = { ...delivery, ...pendingState(now) };
  await trx('deliveries').insert(row);
}

/** Lists cut to a size every engine takes as bound parameters of one statement. */
function chunks<T>(items: T[], size = 500): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export function createEventStore(db: Knex) {
  const finishAttempt = (row: AttemptRow | null, eventId: string, claim: { owner: string; attempt: number }, next: NextState): Promise<boolean> =>
    runInTransaction(db, (trx) => finishOne(trx, { row, eventId, claim, next }));

  return {
    findEndpoint: (siteId: string) => findEndpointOfSite(db, siteId),

    async insertEndpoint(row: EndpointRow): Promise<void> {
      await db('webhook_endpoints').insert(row);
    },

    /** Changes an address; with `trx`, inside the caller's transaction (an audited change). */
    async updateEndpoint(id: string, fields: Partial<Omit<EndpointRow, 'id' | 'site_id' | 'created_at'>>, trx: Knex = db): Promise<void> {
      await trx('webhook_endpoints').where({ id }).update(fields);
    },

    /**
     * Starts a planned roll unless one is pending (a conditional update: of two rolls at once, one
     * writes); false when one is.
     */
    async startSecretRoll(id: string, fields: { secret_next_encrypted: string; secret_switch_at: number; updated_at: number }, trx: Knex = db) {
      return Number(await trx('webhook_endpoints').where({ id }).whereNull('secret_next_encrypted').update(fields)) === 1;
    },

    /** Drops the pending roll that switches at `switchAt` (and no other: a roll changed meanwhile stays); false when there is none such. */
    async cancelSecretRoll(id: string, switchAt: number, at: number, trx: Knex = db) {
      return (
        Number(
          await trx('webhook_endpoints')
            .where({ id, secret_switch_at: switchAt })
            .whereNotNull('secret_next_encrypted')
            .update({ secret_next_encrypted: null, secret_switch_at: null, updated_at: at }),
        ) === 1
      );
    },

    async findEvent(id: string): Promise<EventRow | undefined> {
      const r = await db('events').where({ id }).first();
      return r && mapEventRow(r);
    },

    /**
     * Per site, how many events were written since `since` and the newest one's time: the chat
     * window's live hub compares this with the events it already knows, so a poll that finds
     * nothing new reads no rows. `siteIds` null asks across all sites (a long list of watched sites
     * would make a long statement).
     */
    async recentEventCounts(siteIds: string[] | null, since: number): Promise<Map<string, { count: number; newest: number }>> {
      const out = new Map<string, { count: number; newest: number }>();
      if (siteIds && !siteIds.length) return out;
      const q = db('events').where('created_at', '>=', since);
      if (siteIds) q.whereIn('site_id', siteIds);
      const rows = await q.groupBy('site_id').select('site_id', db.raw('count(*) as n'), db.raw('max(created_at) as m'));
      for (const r of rows as { site_id: string; n: unknown; m: unknown }[]) out.set(r.site_id, { count: Number(r.n), newest: Number(r.m) });
      return out;
    },

    /** The ids and times of the events of these sites written since `since` (the hub's look-back window). */
    async recentEvents(siteIds: string[], since: number): Promise<{ id: string; siteId: string; createdAt: number }[]> {
      const out: { id: string; siteId: string; createdAt: number }[] = [];
      for (const sites of chunks(siteIds)) {
        const rows: { id: string; site_id: string; created_at: unknown }[] = await db('events')
          .whereIn('site_id', sites)
          .andWhere('created_at', '>=', since)
          .select('id', 'site_id', 'created_at');
        for (const r of rows) out.push({ id: r.id, siteId: r.site_id, createdAt: Number(r.created_at) });
      }
      return out;
    },

    /**
     * The visitor of each event, from the conversation in its body; null when the body cannot say
     * (its reader then wakes every stream of the site rather than miss one).
     */
    async visitorsOfEvents(ids: string[]): Promise<Map<string, string | null>> {
      const out = new Map<string, string | null>();
      for (const some of chunks(ids)) {
        const rows: { id: string; body: string }[] = await db('events').whereIn('id', some).select('id', 'body');
        for (const r of rows) {
          let visitor: unknown;
          try {
            visitor = JSON.parse(r.body)?.data?.conversation?.visitorId;
          } catch {
            visitor = undefined;
          }
          out.set(r.id, typeof visitor === 'string' ? visitor : null);
        }
      }
      return out;
    },

    /** Whether some delivery is due at `now` (claimed rows are leased into the future): one row of the due index, no lock. */
    async anyDue(now: number): Promise<boolean> {
      const row = await db('deliveries').where('status', 'pending').andWhere('next_attempt_at', '<=', now).first('event_id');
      return row !== undefined;
    },

    /**
     * Claims up to `limit` due deliveries for `owner`, with their event and address: each gets one
     * more attempt counted and a lease (next_attempt_at moves to the lease's end, so if this worker
     * dies the row is due again then). The candidates are read with forUpdateSkipLocked, so
     * concurrent workers on MySQL take different rows without waiting on each other (SQLite's
     * transactions take the write lock first, see runInTransaction); one UPDATE claims them all and
     * one joined read returns them with what the attempt needs. The locking read does not join the
     * events and addresses: it would lock (and make other workers skip) the address row too.
     *
     * The limits are the caller's (scheduler.ts decides them): `held` counts the rows this worker
     * holds per address and `allowance` says how many it may hold of an address; rows beyond it are
     * left for a later round (scheduler.ts's takeWithinAllowance). When the locking read came back
     * full, rows of other addresses may be hidden behind those: the addresses that filled up are
     * answered in `filled`, and a round that leaves them out (`leaveOut`) finds the rest. Such a
     * round walks the left-out addresses' whole backlog in the due index, so the worker runs it
     * sparingly. The rows in
     * `exclude` are left alone even when their lease ran out: they are this worker's own, still
     * waiting or in flight (a stalled database or a slow receiver outlasted the lease), and claiming
     * them again would send the event a second time alongside the first.
     */
    async claimDue(opts: ClaimRequest): Promise<{ claimed: Claimed[]; filled: string[] }> {
      const { owner, now, leaseMs, limit, maxAttempts } = opts;
      if (limit <= 0) return { claimed: [], filled: [] };
      const full = addressesLeftOut(opts.held, opts.allowance, opts.leaveOut);
      const own = [...(opts.exclude ?? [])];
      const leaseUntil = now + leaseMs;
      const work = async (q: Knex.Transaction) => {
        let select = q('deliveries').where('status', 'pending').andWhere('next_attempt_at', '<=', now).orderBy('next_attempt_at').limit(limit);
        if (full.size) select = select.whereNotIn('endpoint_id', [...full]);
        if (own.length) select = select.whereNotIn('event_id', own);
        const candidates = (await forUpdateSkipLocked(q, select.select(DELIVERY_COLUMNS))).map(mapDeliveryRow);
        const { chosen, filled } = takeWithinAllowance(candidates, { limit, held: opts.held, allowance: opts.allowance });
        if (chosen.length === 0) return { claimed: [], filled };
        const ids = chosen.map((r) => r.event_id);
        const terms = { owner, now, leaseUntil, maxAttempts };
        const n = await q('deliveries')
          .whereIn('event_id', ids)
          .andWhere('status', 'pending')
          .andWhere('next_attempt_at', '<=', now)
          .update(claimChanges(q, terms));
        // The rows are locked (MySQL) or the write lock is ours (SQLite), so the UPDATE took every
        // one of them and their new state follows from the locking read: no read back. Should it
        // ever take fewer, what it took is read back instead.
        const ours = n === ids.length ? undefined : await claimedBack(q, ids, owner, leaseUntil);
        // The events' bodies, and each address once (not joined into every row: a claim of one
        // address's backlog read its columns a few hundred times).
        const events = new Map<string, Record<string, unknown>>(
          (await q('events').whereIn('id', ids).select('id', 'name', 'body', 'created_at')).map((r: Record<string, unknown>) => [String(r.id), r]),
        );
        const endpointIds = [...new Set(chosen.map((r) => r.endpoint_id))];
        const endpoints = new Map<string, EndpointRow>(
          (await q('webhook_endpoints').whereIn('id', endpointIds)).map((r: Record<string, unknown>) => {
            const row = mapEndpointRow(r);
            return [row.id, row];
          }),
        );
        const claimed: Claimed[] = [];
        for (const before of chosen) {
          if (ours && !ours.has(before.event_id)) continue;
          const delivery = claimedState(before, terms);
          const e = events.get(before.event_id);
          claimed.push({
            delivery,
            attempt: delivery.attempts,
            interrupted: before.lease_owner ? { attempt: before.attempts, startedAt: before.updated_at, leaseUntil: before.lease_until ?? now } : null,
            exhausted: before.attempts - before.round_base >= maxAttempts,
            event:
              e === undefined ? undefined : mapEventRow({ id: before.event_id, site_id: before.site_id, name: e.name, body: e.body, created_at: e.created_at }),
            endpoint: endpoints.get(before.endpoint_id),
          });
        }
        return { claimed, filled };
      };
      // READ COMMITTED: the locking read takes no gap locks, so it never holds up the outbox inserts
      // of new deliveries while it runs. Contention that outlasts the retries reaches the worker as
      // the database's own error: it logs it and claims again at its next poll.
      return runInTransaction(db, work, { isolation: 'read committed', whenBusy: 'rethrow' });
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
    finishAttempt,

    /**
     * finishAttempt for many claims of one owner in one commit: one UPDATE for every delivery and one
     * INSERT for every log row, so a worker that sends hundreds of attempts a second commits a few
     * dozen times. When some claim is no longer this owner's (a lease ran out: rare), the group is
     * rolled back and each result is recorded on its own, with finishAttempt's rules.
     */
    async finishAttempts(owner: string, results: Outcome[]): Promise<boolean[]> {
      if (results.length === 0) return [];
      if (results.length === 1) return [await finishAttempt(results[0].row, results[0].eventId, { owner, attempt: results[0].attempt }, results[0].next)];
      const whole = await runInTransaction(db, async (trx) => {
        // One UPDATE per kind of next state (in a busy worker: one, every row delivered at its
        // first attempt), with only the times per row: a CASE per column made each row cost six
        // WHEN pairs to bind, send and evaluate.
        let n = 0;
        for (const part of byNextState(results)) {
          const first = part[0];
          const timeOf = (value: (r: Outcome) => number) =>
            trx.raw(
              `CASE event_id ${part.map(() => 'WHEN ? THEN ?').join(' ')} END`,
              part.flatMap((r) => [r.eventId, value(r)]),
            );
          n += await trx('deliveries')
            .whereIn(
              'event_id',
              part.map((r) => r.eventId),
            )
            .andWhere('lease_owner', owner)
            .andWhere('attempts', first.attempt)
            .update({
              status: first.next.status,
              next_attempt_at: timeOf((r) => r.next.nextAttemptAt),
              attempts: first.next.attempts ?? first.attempt,
              lease_owner: null,
              lease_until: null,
              updated_at: timeOf((r) => r.next.now),
              // A claimed row has no reason (redelivery clears it), so only an unsent end writes one.
              ...(first.next.unsentReason === undefined ? {} : { unsent_reason: first.next.unsentReason }),
            });
        }
        if (n !== results.length) throw new PartialGroup();
        const rows = results.flatMap((r) => (r.row ? [r.row] : []));
        if (rows.length) await insertAttemptRows(trx, rows);
        return true;
      }).catch((err) => {
        if (err instanceof PartialGroup) return false;
        throw err;
      });
      if (whole) return results.map(() => true);
      const applied: boolean[] = [];
      for (const r of results) applied.push(await finishAttempt(r.row, r.eventId, { owner, attempt: r.attempt }, r.next));
      return applied;
    },

    /**
     * Logs an attempt whose worker never reported back (found by the claim that took its expired
     * lease), unless that worker's real result is in the log already: it may have been late, not dead.
     */
    async logInterrupted(row: Omit<AttemptRow, 'error' | 'status_code' | 'response_excerpt'>): Promise<void> {
      await runInTransaction(db, async (trx) => {
        const known = await trx('delivery_attempts').where({ event_id: row.event_id, attempt: row.attempt }).first('id');
        if (!known) await trx('delivery_attempts').insert({ ...row, status_code: null, error: INTERRUPTED, response_excerpt: null });
      });
    },

    /**
     * Puts an event back to pending with a fresh attempt budget (attempt numbers continue). A row
     * that a worker is sending right now is left alone: it is being delivered already. In `trx`
     * when given (an audited redelivery), else in a transaction of its own.
     */
    async resetForRedelivery(event: EventRow, endpointId: string, now: number, trx?: Knex.Transaction): Promise<boolean> {
      const work = async (t: Knex.Transaction) => {
        const current = await forUpdate(t, t('deliveries').where({ event_id: event.id }).first());
        if (!current) {
          await insertPendingDelivery(t, { event_id: event.id, site_id: event.site_id, endpoint_id: endpointId }, now);
          return true;
        }
        const row = mapDeliveryRow(current);
        if (row.status === 'pending' && row.lease_owner && (row.lease_until ?? 0) > now) return false;
        await t('deliveries')
          .where({ event_id: event.id })
          .update({ status: 'pending', endpoint_id: endpointId, round_base: row.attempts, next_attempt_at: now, updated_at: now, unsent_reason: null });
        return true;
      };
      return trx ? work(trx) : runInTransaction(db, work);
    },

    /**
     * Recovery: every real (not test) delivery of the site's events created at or after `since`
     * that ended failed goes back to pending, as resetForRedelivery does, in `trx` when given (the
     * audited change's; READ COMMITTED, so no gap locks hold up the outbox meanwhile). The rows are locked first (only the deliveries: the events are read, not locked),
     * so the ids answered are exactly the rows changed. Returns them in the events' creation order.
     */
    async resetFailedSince(siteId: string, since: number, endpointId: string, now: number, trx?: Knex.Transaction): Promise<string[]> {
      const work = async (t: Knex.Transaction) => {
        const ids: string[] = (
          await forUpdate(
            t,
            t('deliveries')
              .where({ site_id: siteId, status: 'failed', test: false })
              .whereIn('event_id', t('events').where('site_id', siteId).andWhere('created_at', '>=', since).select('id'))
              .select('event_id'),
          )
        ).map((r: { event_id: string }) => r.event_id);
        for (const some of chunks(ids)) {
          await t('deliveries')
            .whereIn('event_id', some)
            .update({ status: 'pending', endpoint_id: endpointId, round_base: t.ref('attempts'), next_attempt_at: now, updated_at: now, unsent_reason: null });
        }
        // An event id ends in a ULID of its creation time: sorted by it, the ids are in creation order.
        const created = (id: string) => id.slice(id.indexOf(':') + 1);
        return ids.sort((a, b) => (created(a) < created(b) ? -1 : created(a) > created(b) ? 1 : 0));
      };
      return trx ? work(trx) : runInTransaction(db, work, { isolation: 'read committed' });
    },

    ...createLogQueries(db),

    /** The delivery log of a site, newest first. */
    async listAttempts(siteId: string, filter: { eventId?: string; eventName?: string; failedOnly?: boolean; limit: number }): Promise<ListedAttempt[]> {
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
      const rows: Record<string, unknown>[] = await q;
      return rows.map((r) => ({ ...mapAttemptRow(r), delivery_status: (r.delivery_status as DeliveryStatus | null) ?? null }));
    },

    /**
     * Deleting a visitor's data: up to `limit` events of these conversations of the site, with their
     * deliveries (pending ones are never sent) and their attempts in the delivery log; answers how
     * many events went (the caller repeats while it answers `limit`). Events older than
     * `events.conversation_id` (010) name no conversation and stay until the log's 30 days end.
     */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[], limit = 500): Promise<number> {
      if (!conversationIds.length) return 0;
      const ids: string[] = await trx('events').whereIn('conversation_id', conversationIds).andWhere('site_id', siteId).limit(limit).pluck('id');
      if (!ids.length) return 0;
      await trx('delivery_attempts').whereIn('event_id', ids).del();
      await trx('deliveries').whereIn('event_id', ids).del();
      return Number(await trx('events').whereIn('id', ids).del());
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
        (ids) =>
          db('delivery_attempts')
            .whereIn('id', ids as number[])
            .del(),
      );
      removed.deliveries = await drain(
        async () =>
          (await db('deliveries').whereIn('status', ['delivered', 'failed']).andWhere('updated_at', '<', cutoff).limit(batch).select('event_id')).map(
            (r) => r.event_id,
          ),
        (ids) =>
          db('deliveries')
            .whereIn('event_id', ids as string[])
            .whereIn('status', ['delivered', 'failed'])
            .del(),
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
        (ids) =>
          db('events')
            .whereIn('id', ids as string[])
            .whereNotExists(db('deliveries as d').whereRaw('d.event_id = events.id').select(db.raw('1')))
            .del(),
      );
      return removed;
    },
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
