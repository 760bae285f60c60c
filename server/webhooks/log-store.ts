import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import { joinedByPrimaryKey, withIndex } from '../db/index-hint';
import { runInTransaction } from '../db/transaction';
import type { Position } from '../platform/cursor';
import { ATTEMPT_COLUMNS, AttemptRow, DeliveryStatus, EventRow, mapAttemptRow, mapEventRow } from './rows';

/** A delivery as the management log lists it: its event, its state and how many attempts it had. */
export interface LoggedDelivery {
  id: string; // the event id
  name: string;
  created_at: number;
  status: DeliveryStatus;
  attempts: number;
  test: boolean;
  next_attempt_at: number;
  updated_at: number;
  /** Why it ended failed without sending in its last round (rows.ts UNSENT); null otherwise. */
  unsent_reason: string | null;
}

export interface DeliveryFilter {
  name?: string;
  status?: DeliveryStatus;
  /** Event creation times, inclusive from, exclusive to. */
  from?: number;
  to?: number;
}

const mapLogged = (r: Record<string, unknown>): LoggedDelivery => ({
  ...withNumericColumns(r as unknown as LoggedDelivery, ['created_at', 'attempts', 'next_attempt_at', 'updated_at']),
  test: Boolean(r.test),
  unsent_reason: (r.unsent_reason as string | null) ?? null,
});

/**
 * The event store's queries for the management API's delivery log, test deliveries, the failure
 * streak and conversation timelines (spread into createEventStore: the same tables, one owner).
 */
export function createLogQueries(db: Knex) {
  async function disable(endpointId: string, reason: 'owner' | 'failing', now: number, trx: Knex): Promise<boolean> {
    const n = await trx('webhook_endpoints')
      .where({ id: endpointId })
      .whereNull('disabled_at')
      .update({ disabled_at: now, disabled_reason: reason, updated_at: now });
    return Number(n) > 0;
  }

  /**
   * The site's events joined to their deliveries, walking events by (site_id[, name], created_at):
   * FORCE INDEX (withIndex) keeps MariaDB from starting at deliveries and sorting the whole site.
   */
  function filtered(siteId: string, f: DeliveryFilter) {
    const index = f.name ? 'events_site_name_created' : 'events_site_id_created_at_index';
    let q = db
      .from(withIndex(db, 'events', index))
      .join(joinedByPrimaryKey(db, 'deliveries') as never, 'deliveries.event_id', 'events.id')
      .where('events.site_id', siteId);
    if (f.name) q = q.andWhere('events.name', f.name);
    if (f.status) q = q.andWhere('deliveries.status', f.status);
    if (f.from !== undefined) q = q.andWhere('events.created_at', '>=', f.from);
    if (f.to !== undefined) q = q.andWhere('events.created_at', '<', f.to);
    return q;
  }

  return {
    /**
     * A page of the site's deliveries, newest event first, by (created_at, id) keyset: a range scan
     * of events (site_id, created_at) or (site_id, name, created_at), each joined to its delivery by
     * primary key.
     */
    async listDeliveries(siteId: string, f: DeliveryFilter, after: Position | undefined, limit: number): Promise<LoggedDelivery[]> {
      let q = filtered(siteId, f);
      if (after) {
        q = q
          .andWhere('events.created_at', '<=', after.createdAt)
          .andWhere((w) => w.where('events.created_at', '<', after.createdAt).orWhere('events.id', '<', after.id));
      }
      const rows = await q
        .orderBy([
          { column: 'events.created_at', order: 'desc' },
          { column: 'events.id', order: 'desc' },
        ])
        .limit(limit)
        .select(
          'events.id',
          'events.name',
          'events.created_at',
          'deliveries.status',
          'deliveries.attempts',
          'deliveries.test',
          'deliveries.next_attempt_at',
          'deliveries.updated_at',
          'deliveries.unsent_reason',
        );
      return rows.map(mapLogged);
    },

    /** One delivery of the site with its event (body included), or undefined. */
    async findDelivery(siteId: string, eventId: string): Promise<{ delivery: LoggedDelivery; event: EventRow } | undefined> {
      const r = await db('events as e')
        .join('deliveries as d', 'd.event_id', 'e.id')
        .where({ 'e.id': eventId, 'e.site_id': siteId })
        .first('e.*', 'd.status', 'd.attempts', 'd.test', 'd.next_attempt_at', 'd.updated_at', 'd.unsent_reason');
      if (!r) return undefined;
      return { delivery: mapLogged(r), event: mapEventRow({ id: r.id, site_id: r.site_id, name: r.name, body: r.body, created_at: r.created_at }) };
    },

    /** Every logged attempt of the events, in attempt order (the event_id index). */
    async attemptsOfEvents(eventIds: string[], limit = 10_000): Promise<AttemptRow[]> {
      if (eventIds.length === 0) return [];
      const rows: Record<string, unknown>[] = await db('delivery_attempts')
        .whereIn('event_id', eventIds)
        .orderBy([{ column: 'event_id' }, { column: 'attempt' }, { column: 'id' }])
        .limit(limit)
        .select(...ATTEMPT_COLUMNS);
      return rows.map(mapAttemptRow);
    },

    /** How many of the site's real (not test) deliveries of events created since `since` ended failed. */
    async countFailedSince(siteId: string, since: number): Promise<number> {
      const r = await db('deliveries as d')
        .join('events as e', 'e.id', 'd.event_id')
        .where({ 'd.site_id': siteId, 'd.status': 'failed', 'd.test': false })
        .andWhere('e.created_at', '>=', since)
        .count({ n: '*' })
        .first();
      return Number(r?.n ?? 0);
    },

    /**
     * A test delivery, already sent: its event, its finished delivery and its one attempt, in one
     * commit (`trx` when given: the audited change's).
     */
    async insertTestDelivery(event: EventRow, endpointId: string, status: 'delivered' | 'failed', attempt: AttemptRow, trx?: Knex.Transaction): Promise<void> {
      const work = async (trx: Knex.Transaction) => {
        await trx('events').insert(event);
        await trx('deliveries').insert({
          event_id: event.id,
          site_id: event.site_id,
          endpoint_id: endpointId,
          status,
          attempts: 1,
          round_base: 1,
          next_attempt_at: attempt.started_at + attempt.duration_ms,
          lease_owner: null,
          lease_until: null,
          updated_at: attempt.started_at + attempt.duration_ms,
          test: true,
        });
        await trx('delivery_attempts').insert(attempt);
      };
      await (trx ? work(trx) : runInTransaction(db, work));
    },

    /**
     * The site's deliveries that ended without sending in their last round, newest first, for the
     * attempt log (which has no row for them): the (site_id, status, updated_at) index, each joined
     * to its event and address by primary key.
     */
    async listUnsent(
      siteId: string,
      filter: { eventId?: string; eventName?: string; limit: number },
    ): Promise<{ event_id: string; event_name: string; url: string | null; updated_at: number; unsent_reason: string }[]> {
      let q = db('deliveries as d')
        .join('events as e', 'e.id', 'd.event_id')
        .leftJoin('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
        .where({ 'd.site_id': siteId, 'd.status': 'failed' })
        .whereNotNull('d.unsent_reason')
        .orderBy([
          { column: 'd.updated_at', order: 'desc' },
          { column: 'd.event_id', order: 'desc' },
        ])
        .limit(filter.limit)
        .select('d.event_id', 'e.name as event_name', 'w.url', 'd.updated_at', 'd.unsent_reason');
      if (filter.eventId) q = q.andWhere('d.event_id', filter.eventId);
      if (filter.eventName) q = q.andWhere('e.name', filter.eventName);
      const rows: Record<string, unknown>[] = await q;
      return rows.map((r) => ({
        event_id: String(r.event_id),
        event_name: String(r.event_name),
        url: (r.url as string | null) ?? null,
        updated_at: Number(r.updated_at),
        unsent_reason: String(r.unsent_reason),
      }));
    },

    /**
     * The events of a conversation created in [from, to], oldest first, with their delivery's state
     * (null: not delivered to any address): a range scan of events_conversation_created.
     */
    async eventsOfConversation(
      conversationId: string,
      from: number,
      to: number,
      limit: number,
    ): Promise<(EventRow & { delivery_status: DeliveryStatus | null })[]> {
      const rows = await db('events as e')
        .leftJoin('deliveries as d', 'd.event_id', 'e.id')
        .where('e.conversation_id', conversationId)
        .andWhere('e.created_at', '>=', from)
        .andWhere('e.created_at', '<=', to)
        .orderBy([{ column: 'e.created_at' }, { column: 'e.id' }])
        .limit(limit)
        .select('e.id', 'e.site_id', 'e.name', 'e.created_at', 'e.conversation_id', 'e.message_id', 'd.status as delivery_status');
      return rows.map((r: Record<string, unknown>) => ({
        ...mapEventRow({ ...r, body: '' }),
        delivery_status: (r.delivery_status as DeliveryStatus | null) ?? null,
      }));
    },

    /**
     * Moves an address's failure streak after deliveries ended: a success resets it (written only
     * when the address was failing, so the usual success costs no statement: the caller asks only
     * when its snapshot saw a streak), failures add to it, counted in the database so workers on
     * several instances add up.
     */
    async noteEndedDeliveries(endpointId: string, ended: { delivered: number; failed: number }, now: number): Promise<void> {
      const q = db('webhook_endpoints').where({ id: endpointId });
      if (ended.delivered > 0) await q.andWhere('failure_streak', '>', 0).update({ failure_streak: 0, failing_since: null });
      else if (ended.failed > 0)
        await q.update({ failure_streak: db.raw('failure_streak + ?', [ended.failed]), failing_since: db.raw('COALESCE(failing_since, ?)', [now]) });
    },

    /**
     * Completes every planned roll whose switch time has come: the next secret becomes the current
     * one and the old one is dropped (SQLite reads the old values in SET, MariaDB assigns left to
     * right; both copy the next secret before clearing it).
     */
    async completeSwitches(now: number): Promise<number> {
      const n = await db('webhook_endpoints')
        .whereNotNull('secret_next_encrypted')
        .andWhere('secret_switch_at', '<=', now)
        .update({ secret_encrypted: db.ref('secret_next_encrypted'), secret_next_encrypted: null, secret_switch_at: null });
      return Number(n);
    },

    /**
     * disableEndpoint with `alongside` (its audit entry) in the same transaction, run only when this
     * call disabled the address; false when it was disabled already.
     */
    async disableEndpointWith(endpointId: string, reason: 'owner' | 'failing', now: number, alongside: (trx: Knex.Transaction) => Promise<unknown> | void) {
      return runInTransaction(db, async (trx) => {
        const disabled = await disable(endpointId, reason, now, trx);
        if (disabled) await alongside(trx);
        return disabled;
      });
    },

    /** Disables an enabled address for `reason`; false when it was disabled already. */
    disableEndpoint: (endpointId: string, reason: 'owner' | 'failing', now: number, trx: Knex = db) => disable(endpointId, reason, now, trx),
  };
}
