import { newId } from '../platform/ids';
import { decrypt, encrypt, randomBase62 } from '../platform/crypto';
import { ApiError, invalid, notFound } from '../platform/errors';
import { EVENT_NAMES, EventName } from './outbox';
import { BlockedIpError, hostOf, resolveChecked, Resolver } from './ssrf';
import { attemptToDto, EndpointRow, EventStore } from './store';
import type { AccessStore } from '../access/store';
import type { Knex } from 'knex';
import { runInTransaction, type TransactionOptions } from '../db/transaction';
import { ulidBody } from '../platform/ids';
import { toIso, toIsoRequired } from '../platform/time';
import type { CursorCodec } from '../platform/cursor';
import type { AuditActor } from '../accounts/audit';
import { completedSwitch, signingSecret, DEFAULT_SWITCH_IN_HOURS, MAX_SWITCH_IN_HOURS, SWITCH_SETTLE_MS } from './address-rules';
import type { DeliveryFilter, LoggedDelivery } from './log-store';
import type { DeliveryTransport } from './transport';
import { signedHeaders } from './worker';
import { outcomeOf } from './retry-policy';
import { examplePayload } from './examples';

export const SECRET_PREFIX = 'whsec_';

/** The operator CLI as an audit actor (no account). */
export const CLI_ACTOR: AuditActor = { manager: null, clientIp: null };

/** How an address looks to its owner: never a secret, only whether a roll is pending and when it switches. */
export function endpointToDto(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    events: row.events.split(',') as EventName[],
    state: row.disabled_at === null ? ('enabled' as const) : ('disabled' as const),
    disabledReason: row.disabled_reason,
    disabledAt: toIso(row.disabled_at),
    failingSince: toIso(row.failing_since),
    failedDeliveries: row.failure_streak,
    secretRoll: row.secret_next_encrypted !== null && row.secret_switch_at !== null ? { switchAt: toIsoRequired(row.secret_switch_at) } : null,
    createdAt: toIsoRequired(row.created_at),
    updatedAt: toIsoRequired(row.updated_at),
  };
}

const deliveryToDto = (d: LoggedDelivery) => ({
  eventId: d.id,
  event: d.name as EventName,
  createdAt: toIsoRequired(d.created_at),
  outcome: d.status,
  attempts: d.attempts,
  test: d.test,
  nextAttemptAt: d.status === 'pending' ? toIsoRequired(d.next_attempt_at) : null,
  updatedAt: toIsoRequired(d.updated_at),
  unsentReason: d.unsent_reason,
});

/** A roll while one is pending: the owner decides what happens to the pending one first. */
const rollPending = (switchAt: number) =>
  new ApiError(
    'conflict',
    `A secret roll is pending until ${toIsoRequired(switchAt)}: switch it now or cancel it, then roll again. Its new secret stays the one your receiver was given.`,
  );

/** Parses `e1,e2`; every name must be one of the three events. No list means all of them. */
export function parseEventNames(value: string | undefined): EventName[] {
  if (value === undefined) return [...EVENT_NAMES];
  const names = [
    ...new Set(
      value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = names.filter((n) => !EVENT_NAMES.includes(n as EventName));
  if (names.length === 0 || unknown.length)
    throw invalid(`events must be a comma-separated subset of ${EVENT_NAMES.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}.`);
  return EVENT_NAMES.filter((n) => names.includes(n)); // stable order
}

/**
 * The rules of event addresses, signing secrets and redelivery (docs/events.md).
 * One address per site. The secret is needed to sign, so it is stored encrypted (AES-256-GCM under
 * a key derived from the master key), never as a fingerprint, and shown only when it is made.
 */
export function createWebhookService(deps: {
  store: EventStore;
  sites: Pick<AccessStore, 'findSite'>;
  /** services.keys.webhookSecrets: encrypts the signing secrets at rest. */
  secretKey: Buffer;
  allowPrivateNetworks: boolean;
  resolve?: Resolver;
  now?: () => number;
  /** For audited changes in one commit with their entry (services.ts passes both). */
  db?: Knex;
  audit?: (actor: AuditActor, siteIds: string[], action: string, objectId: string | null, trx?: Knex) => Promise<unknown>;
  cursors?: CursorCodec;
  /** An HTTPS client for test deliveries (services.ts makes one like the worker's); closed after each. */
  transport?: () => DeliveryTransport;
}) {
  const { store, sites } = deps;
  const now = deps.now ?? Date.now;

  /**
   * A change and its audit entry in one commit: the entry is written after the change, in its
   * transaction, so a change that fails writes no entry and an entry that fails undoes the change.
   * Without a database (tests of the rules alone) the change runs by itself, unaudited.
   */
  async function audited<T>(
    actor: AuditActor,
    siteId: string,
    action: string,
    objectId: string,
    change: (trx?: Knex.Transaction) => Promise<T>,
    options?: TransactionOptions,
  ): Promise<T> {
    if (!deps.db) return change();
    return runInTransaction(
      deps.db,
      async (trx) => {
        const out = await change(trx);
        await deps.audit?.(actor, [siteId], action, objectId, trx);
        return out;
      },
      options,
    );
  }

  /** The site's address with a switch that has come completed (the old secret dropped), or 404. */
  async function requireEndpoint(siteId: string): Promise<EndpointRow> {
    await requireSite(siteId);
    const row = await store.findEndpoint(siteId);
    if (!row) throw notFound('Event address of this site');
    const done = completedSwitch(row, now());
    if (!done) return row;
    await store.updateEndpoint(row.id, done);
    return { ...row, ...done };
  }

  async function checkUrl(raw: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid(`"${raw}" is not a URL.`);
    }
    if (url.protocol !== 'https:') throw invalid('An event address must start with https://.');
    if (url.username || url.password) throw invalid('An event address must not carry a user name or password; authenticate deliveries with the signature.');
    if (raw.length > 2048) throw invalid('An event address is at most 2048 characters.');
    url.hash = '';
    const host = hostOf(url);
    try {
      await resolveChecked(host, { allowPrivate: deps.allowPrivateNetworks, resolve: deps.resolve });
    } catch (err) {
      if (err instanceof BlockedIpError) {
        throw invalid(
          `${host} resolves to a loopback, private, link-local or otherwise reserved IP; event addresses must be public (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true allows them, for development only).`,
        );
      }
      throw invalid(`${host} does not resolve (${(err as { code?: string }).code ?? (err as Error).message}).`);
    }
    return url.toString();
  }

  async function requireSite(siteId: string) {
    if (!(await sites.findSite(siteId))) throw notFound('Site');
  }

  const newSecret = () => SECRET_PREFIX + randomBase62(32);

  return {
    /**
     * Sets the site's address and events. The first time a secret is made and returned; later
     * changes keep the secret (receivers keep verifying) and return `secret: null`; use
     * rotateSecret for a new one.
     */
    async setEndpoint(
      siteId: string,
      rawUrl: string,
      events?: string,
      actor: AuditActor = CLI_ACTOR,
    ): Promise<{ id: string; url: string; events: EventName[]; secret: string | null }> {
      await requireSite(siteId);
      const url = await checkUrl(rawUrl);
      const names = parseEventNames(events);
      const at = now();
      const existing = await store.findEndpoint(siteId);
      if (existing) {
        await audited(actor, siteId, 'event_address.updated', existing.id, (trx) =>
          store.updateEndpoint(existing.id, { url, events: names.join(','), updated_at: at }, trx),
        );
        return { id: existing.id, url, events: names, secret: null };
      }
      const secret = newSecret();
      const row: EndpointRow = {
        id: newId('whk', at),
        site_id: siteId,
        url,
        events: names.join(','),
        secret_encrypted: encrypt(deps.secretKey, secret),
        secret_next_encrypted: null,
        secret_switch_at: null,
        disabled_at: null,
        disabled_reason: null,
        failing_since: null,
        failure_streak: 0,
        created_at: at,
        updated_at: at,
      };
      await audited(actor, siteId, 'event_address.created', row.id, async (trx) => {
        if (trx) await trx('webhook_endpoints').insert(row);
        else await store.insertEndpoint(row);
      });
      return { id: row.id, url, events: names, secret };
    },

    /** The site's address as its owner sees it (404 when it has none). */
    async getEndpoint(siteId: string) {
      return endpointToDto(await requireEndpoint(siteId));
    },

    /**
     * Disables or enables the address. Disabled, its deliveries end failed without an attempt
     * (recovery sends them once it is enabled again). Enabling clears the failure streak, so the
     * automatic rule starts counting afresh.
     */
    async setEnabled(siteId: string, enabled: boolean, actor: AuditActor = CLI_ACTOR) {
      const row = await requireEndpoint(siteId);
      const at = now();
      if (enabled && row.disabled_at !== null) {
        const fields = { disabled_at: null, disabled_reason: null, failing_since: null, failure_streak: 0, updated_at: at };
        await audited(actor, siteId, 'event_address.enabled', row.id, (trx) => store.updateEndpoint(row.id, fields, trx));
        return endpointToDto({ ...row, ...fields });
      }
      if (!enabled && row.disabled_at === null) {
        await audited(actor, siteId, 'event_address.disabled', row.id, (trx) => store.disableEndpoint(row.id, 'owner', at, trx));
        return endpointToDto({ ...row, disabled_at: at, disabled_reason: 'owner', updated_at: at });
      }
      return endpointToDto(row);
    },

    /**
     * A new secret replaces the old one at once (the spec's lost secret): attempts signed from now
     * on carry it. A planned roll in progress is dropped with the old secret.
     */
    async rotateSecret(siteId: string, actor: AuditActor = CLI_ACTOR): Promise<{ id: string; secret: string }> {
      const row = await requireEndpoint(siteId);
      const secret = newSecret();
      const fields = { secret_encrypted: encrypt(deps.secretKey, secret), secret_next_encrypted: null, secret_switch_at: null, updated_at: now() };
      await audited(actor, siteId, 'event_address.secret_rotated', row.id, (trx) => store.updateEndpoint(row.id, fields, trx));
      return { id: row.id, secret };
    },

    /**
     * The planned roll: a new secret, shown now, that starts signing at the switch time
     * (`switchInHours` from now, 24 by default); until then attempts stay signed with the current
     * one, and at the switch the old one is dropped. While a roll is pending another is refused
     * (409 `conflict`): replacing its secret silently would break a receiver already given it;
     * the owner switches it now or cancels it first.
     */
    async rollSecret(
      siteId: string,
      switchInHours: number = DEFAULT_SWITCH_IN_HOURS,
      actor: AuditActor = CLI_ACTOR,
    ): Promise<{ id: string; secret: string; switchAt: string }> {
      if (!Number.isFinite(switchInHours) || switchInHours < 1 || switchInHours > MAX_SWITCH_IN_HOURS) {
        throw invalid(`switchInHours must be 1 to ${MAX_SWITCH_IN_HOURS}.`, [{ path: '/body/switchInHours', message: `must be 1 to ${MAX_SWITCH_IN_HOURS}` }]);
      }
      const row = await requireEndpoint(siteId);
      if (row.secret_switch_at !== null && row.secret_next_encrypted !== null) throw rollPending(row.secret_switch_at);
      const secret = newSecret();
      const at = now();
      const switchAt = at + Math.round(switchInHours * 3600_000);
      const fields = { secret_next_encrypted: encrypt(deps.secretKey, secret), secret_switch_at: switchAt, updated_at: at };
      await audited(actor, siteId, 'event_address.secret_roll_started', row.id, async (trx) => {
        if (!(await store.startSecretRoll(row.id, fields, trx))) {
          // Another roll was written since the read above.
          const current = await store.findEndpoint(siteId);
          throw rollPending(current?.secret_switch_at ?? switchAt);
        }
      });
      return { id: row.id, secret, switchAt: toIsoRequired(switchAt) };
    },

    /**
     * Cancels a pending roll: its new secret is dropped unused and the current one keeps signing.
     * Refused (409) once the switch is under way (SWITCH_SETTLE_MS or less away, e.g. after a
     * switch-now): a worker may already have read the address and sign with the new secret at the
     * switch time, so only a roll that cannot have reached any attempt is taken back.
     */
    async cancelSecretRoll(siteId: string, actor: AuditActor = CLI_ACTOR) {
      const row = await requireEndpoint(siteId);
      if (row.secret_next_encrypted === null || row.secret_switch_at === null) throw invalid('No secret roll is pending.');
      const at = now();
      if (row.secret_switch_at - at <= SWITCH_SETTLE_MS)
        throw new ApiError('conflict', `The roll is switching at ${toIsoRequired(row.secret_switch_at)}; it can no longer be cancelled.`);
      await audited(actor, siteId, 'event_address.secret_roll_cancelled', row.id, async (trx) => {
        if (!(await store.cancelSecretRoll(row.id, row.secret_switch_at!, at, trx)))
          throw new ApiError('conflict', 'The roll changed while it was being cancelled; read the address and try again.');
      });
      return endpointToDto({ ...row, secret_next_encrypted: null, secret_switch_at: null, updated_at: at });
    },

    /**
     * Switches a pending roll now: the switch time becomes SWITCH_SETTLE_MS from now, the longest a
     * worker may sign with an address read before this change (address-rules.ts), so no attempt
     * signed after the answered time carries the old secret on any instance.
     */
    async switchSecret(siteId: string, actor: AuditActor = CLI_ACTOR): Promise<{ id: string; switchAt: string }> {
      const row = await requireEndpoint(siteId);
      if (row.secret_next_encrypted === null || row.secret_switch_at === null)
        throw invalid('No secret roll is pending; start one with the roll operation first.');
      const at = now();
      const switchAt = Math.min(row.secret_switch_at, at + SWITCH_SETTLE_MS);
      await audited(actor, siteId, 'event_address.secret_switched', row.id, (trx) =>
        store.updateEndpoint(row.id, { secret_switch_at: switchAt, updated_at: at }, trx),
      );
      return { id: row.id, switchAt: toIsoRequired(switchAt) };
    },

    /**
     * A signed test delivery: an example payload of `eventName`, signed with the secret that signs
     * now, with the headers of a real attempt, sent once and recorded in the log as a test (never
     * retried, redelivered, recovered or counted toward disabling). Sent to a disabled address too:
     * checking a receiver is how an owner decides to enable it again.
     */
    async sendTest(siteId: string, eventName: string, actor: AuditActor = CLI_ACTOR) {
      if (!EVENT_NAMES.includes(eventName as EventName))
        throw invalid(`event must be one of ${EVENT_NAMES.join(', ')}.`, [{ path: '/body/event', message: 'unknown event' }]);
      const row = await requireEndpoint(siteId);
      if (!deps.transport) throw new Error('test deliveries need a transport');
      const at = now();
      const id = `${eventName}:${ulidBody(at)}`;
      const body = JSON.stringify(examplePayload(eventName as EventName, id, siteId, at));
      const startedAt = Date.now();
      const headers = signedHeaders(decrypt(deps.secretKey, signingSecret(row, startedAt)), eventName, id, 1, body, startedAt);
      const transport = deps.transport();
      let result;
      try {
        result = await transport.post(row.url, body, headers);
      } finally {
        transport.close();
      }
      const durationMs = Date.now() - startedAt;
      const outcome = outcomeOf(result) === 'delivered' ? ('delivered' as const) : ('failed' as const);
      const error = result.status !== null && result.status >= 300 && result.status < 400 ? 'redirect not followed' : (result.error?.slice(0, 500) ?? null);
      // The send itself cannot be in a transaction: the entry commits with the test's record in the
      // log, so the audit log and the delivery log agree (docs/manage.md, the audit log).
      const event = { id, site_id: siteId, name: eventName, body, created_at: at, conversation_id: null, message_id: null };
      await audited(actor, siteId, 'event_address.test_sent', id, (trx) =>
        store.insertTestDelivery(
          event,
          row.id,
          outcome,
          {
            event_id: id,
            site_id: siteId,
            endpoint_id: row.id,
            event_name: eventName,
            attempt: 1,
            url: row.url,
            started_at: startedAt,
            duration_ms: durationMs,
            status_code: result.status,
            error,
            response_excerpt: result.response,
            request_headers: JSON.stringify(headers),
          },
          trx,
        ),
      );
      return { eventId: id, event: eventName as EventName, outcome, status: result.status, error, response: result.response, durationMs };
    },

    /** A page of the site's deliveries, newest first, filtered by event name, outcome and creation time. */
    async listDeliveries(siteId: string, q: { event?: string; outcome?: string; since?: string; until?: string; limit?: number; cursor?: string }) {
      await requireSite(siteId);
      if (q.event !== undefined && !EVENT_NAMES.includes(q.event as EventName))
        throw invalid(`event must be one of ${EVENT_NAMES.join(', ')}.`, [{ path: '/query/event', message: 'unknown event' }]);
      const f: DeliveryFilter = {
        name: q.event,
        status: q.outcome as DeliveryFilter['status'],
        from: q.since ? Date.parse(q.since) : undefined,
        to: q.until ? Date.parse(q.until) : undefined,
      };
      const limit = q.limit ?? 25;
      const scope = { log: 'deliveries', siteId, f };
      const after = q.cursor ? deps.cursors!.decode(q.cursor, scope) : undefined;
      const rows = await store.listDeliveries(siteId, f, after, limit + 1);
      const hasMore = rows.length > limit;
      const page = hasMore ? rows.slice(0, limit) : rows;
      const last = page[page.length - 1];
      return {
        data: page.map(deliveryToDto),
        page: { nextCursor: hasMore && last ? deps.cursors!.encode({ createdAt: last.created_at, id: last.id }, scope) : null, hasMore },
      };
    },

    /** One delivery of the site with its request body and every attempt (headers as sent, answer excerpt, error, duration). */
    async getDelivery(siteId: string, eventId: string) {
      await requireSite(siteId);
      const found = await store.findDelivery(siteId, eventId);
      if (!found) throw notFound('Delivery');
      const attempts = await store.attemptsOfEvents([eventId]);
      return {
        delivery: deliveryToDto(found.delivery),
        requestBody: found.event.body,
        attempts: attempts.map((a) => ({
          attempt: a.attempt,
          url: a.url,
          startedAt: toIsoRequired(a.started_at),
          durationMs: a.duration_ms,
          requestHeaders: a.request_headers ? (JSON.parse(a.request_headers) as Record<string, string>) : null,
          status: a.status_code,
          response: a.response_excerpt,
          error: a.error,
        })),
      };
    },

    /** How many deliveries `redeliverFailedSince` would send again (the count an owner sees first). */
    async countFailedSince(siteId: string, since: number): Promise<number> {
      await requireSite(siteId);
      return store.countFailedSince(siteId, since);
    },

    /**
     * The delivery log, one row per attempt, newest first. `event` is an event id or an event name.
     * A delivery that ended without sending in its last round has no attempt row: it is listed as
     * one row of attempt 0 at the time it ended, its error the reason (always a failure).
     */
    async deliveries(siteId: string, filter: { event?: string; failed?: boolean; limit?: number } = {}) {
      await requireSite(siteId);
      const isName = filter.event !== undefined && EVENT_NAMES.includes(filter.event as EventName);
      const limit = filter.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit must be 1 to 1000.');
      const which = { eventId: isName ? undefined : filter.event, eventName: isName ? filter.event : undefined, limit };
      const [attempts, unsent] = await Promise.all([store.listAttempts(siteId, { ...which, failedOnly: filter.failed }), store.listUnsent(siteId, which)]);
      const rows = [
        ...attempts.map(attemptToDto),
        ...unsent.map((u) => ({
          eventId: u.event_id,
          event: u.event_name,
          attempt: 0,
          url: u.url,
          startedAt: toIsoRequired(u.updated_at),
          durationMs: 0,
          status: null,
          error: `not sent: ${u.unsent_reason}`,
          response: null,
          deliveryStatus: 'failed' as const,
        })),
      ];
      // Both lists are newest first; merged, the newest `limit` of them.
      return rows.sort((a, b) => (a.startedAt < b.startedAt ? 1 : a.startedAt > b.startedAt ? -1 : 0)).slice(0, limit);
    },

    /**
     * Sends one event again: same id, same body, attempt numbers continue, a fresh budget of
     * attempts. Audited (the CLI as `operator`) in the transaction that queues it.
     */
    async redeliverEvent(eventId: string, opts: { siteId?: string; actor?: AuditActor } = {}): Promise<string[]> {
      const event = await store.findEvent(eventId);
      if (!event || (opts.siteId !== undefined && event.site_id !== opts.siteId)) throw notFound('Event');
      if (opts.siteId !== undefined && (await store.findDelivery(opts.siteId, eventId))?.delivery.test)
        throw invalid('A test delivery is not redelivered; send another test.');
      const endpoint = await store.findEndpoint(event.site_id);
      if (!endpoint) throw new ApiError('invalid_request', 'The site of this event has no event address.');
      const queued = await audited(opts.actor ?? CLI_ACTOR, event.site_id, 'delivery.redelivered', event.id, (trx) =>
        store.resetForRedelivery(event, endpoint.id, now(), trx),
      );
      return queued ? [event.id] : [];
    },

    /**
     * Sends again every event of the site created since `since` whose delivery ended failed: every
     * row is queued, and the entry written, in one transaction (READ COMMITTED: no gap locks hold up
     * the outbox's new deliveries meanwhile).
     */
    async redeliverFailedSince(siteId: string, since: number, actor: AuditActor = CLI_ACTOR): Promise<string[]> {
      await requireSite(siteId);
      const endpoint = await store.findEndpoint(siteId);
      if (!endpoint) throw new ApiError('invalid_request', 'This site has no event address.');
      return audited(actor, siteId, 'delivery.recovered', endpoint.id, (trx) => store.resetFailedSince(siteId, since, endpoint.id, now(), trx), {
        isolation: 'read committed',
      });
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
