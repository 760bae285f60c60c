import fs from 'node:fs';
import type { Config } from '../config';
import type { Logger } from '../platform/logger';
import { decrypt, hmacHex } from '../platform/crypto';
import { UNSENT, type AttemptRow, type Claimed, type EventStore } from './store';
import { createDeliveryTransport, DeliveryTransport, PostResult } from './transport';
import { retryPolicy } from './retry-policy';
import { DELIVERY_KINDS, EventChannel } from '../delivery/channel';
import { createDeliveryEngine, DeliveryProvider, DeliveryWorker, EngineClaim } from '../delivery/engine';
import { memoised } from '../platform/memo';
import type { Resolver } from './ssrf';
import { signingSecret, SWITCH_SETTLE_MS } from './address-rules';
import { AutoDisabledHook, createStreakKeeper } from './failure-streak';

export type { DeliveryWorker } from '../delivery/engine';

export interface WorkerOptions {
  store: EventStore;
  config: Pick<
    Config,
    'webhookAllowPrivateNetworks' | 'webhookCaFile' | 'webhookTimeoutMs' | 'webhookRetryDelaysMs' | 'webhookConcurrency' | 'webhookMaxInFlightPerAddress'
  >;
  /** services.keys.webhookSecrets: opens the stored signing secrets. */
  secretKey: Buffer;
  logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Deliveries in flight at once, over all sites (default WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** In flight at once to one address, so one slow receiver cannot take every slot (default WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS). */
  perEndpoint?: number;
  /**
   * The longest pause between looks for due rows written or rescheduled by other processes. Without
   * a live event channel the worker looks every 50 ms while it finds work and backs off to this.
   */
  pollMs?: number;
  /** Wakes this worker when any process commits events (Redis pub/sub with REDIS_URL). */
  channel?: Pick<EventChannel, 'subscribe' | 'live'>;
  /** The HTTPS client of the attempts; built from the config when not given (tests pass their own). */
  transport?: DeliveryTransport;
  /** How long a claim is ours; after it, another worker may retry the row. */
  leaseMs?: number;
  resolve?: Resolver;
  owner?: string;
  /** Run in the transaction that disables an address after persistent failure (failure-streak.ts): its audit entry. */
  onAutoDisabled?: AutoDisabledHook;
}

/** The headers of one attempt: a fresh timestamp and signature, the same id and body every time. */
export function signedHeaders(secret: string, eventName: string, eventId: string, attempt: number, body: string, nowMs: number): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  return {
    'Content-Type': 'application/json',
    'User-Agent': 'chat-service-webhooks/1',
    'X-Service-Event': eventName,
    'X-Service-Delivery': eventId,
    'X-Service-Attempt': String(attempt),
    'X-Service-Timestamp': timestamp,
    'X-Service-Signature': `sha256=${hmacHex(secret, `${timestamp}.${body}`)}`,
  };
}

/** A claimed event delivery: the engine's view of it beside the event and address its claim read. */
type EventClaim = EngineClaim & Claimed;

/** The claim as the engine sees it: the store's object itself, given the engine's fields (one object per delivery, not two). */
function engineClaim(c: Claimed): EventClaim {
  const e = c as EventClaim;
  e.key = c.delivery.event_id;
  e.address = c.delivery.endpoint_id;
  e.leaseUntil = c.delivery.lease_until;
  e.roundBase = c.delivery.round_base;
  return e;
}

/** The host of an address for log lines (never its path or query, which may carry a receiver's token), parsed once per address. */
const hostOfUrl = memoised(1000, (url: string) => new URL(url).host);

/**
 * The event delivery worker: the delivery engine (../delivery/engine.ts: claims, leases, retries,
 * batched results) with events' provider. One attempt is one HTTPS POST of the event's fixed body,
 * signed afresh with the address's secret; the retry schedule is WEBHOOK_RETRY_DELAYS_MS over the
 * HTTP answer (retry-policy.ts); an address that keeps failing is disabled (failure-streak.ts).
 */
export function createDeliveryWorker(opts: WorkerOptions): DeliveryWorker {
  const { store, config, secretKey, logger } = opts;
  const concurrency = opts.concurrency ?? config.webhookConcurrency;
  const perEndpoint = opts.perEndpoint ?? config.webhookMaxInFlightPerAddress;
  // The attempt's own time-out plus room to wait for a slot and to write its result; a lease that
  // ran out means the worker died.
  const leaseMs = opts.leaseMs ?? config.webhookTimeoutMs + 10_000;
  // One transport for the worker's life: one secure context, kept-alive connections per checked address.
  const transport =
    opts.transport ??
    createDeliveryTransport({
      timeoutMs: config.webhookTimeoutMs,
      allowPrivate: config.webhookAllowPrivateNetworks,
      ca: config.webhookCaFile ? [fs.readFileSync(config.webhookCaFile, 'utf8')] : undefined,
      resolve: opts.resolve,
      maxIdleSocketsPerAddress: perEndpoint,
    });
  /** Opens a sealed signing secret, kept by its sealed text (a rotated secret has a new one). */
  const secretOf = memoised(1000, (sealed: string) => decrypt(secretKey, sealed));
  const afterResults = createStreakKeeper({ store, logger, onAutoDisabled: opts.onAutoDisabled });

  const provider: DeliveryProvider<EventClaim, PostResult, AttemptRow> = {
    label: 'event delivery',
    // Outbox events only: an inbox row or a typing signal can never make a delivery due.
    kinds: DELIVERY_KINDS,
    schedule: retryPolicy(config.webhookRetryDelaysMs),
    claimDue: async (req) => {
      const { claimed, filled } = await store.claimDue(req);
      return { claimed: claimed.map(engineClaim), filled };
    },
    anyDue: (now) => store.anyDue(now),
    finishAttempts: (owner, outcomes) =>
      store.finishAttempts(
        owner,
        outcomes.map(({ key, ...o }) => ({ eventId: key, ...o })),
      ),
    async logInterrupted(c) {
      const { event, endpoint } = c;
      if (!c.interrupted || !event || !endpoint) return;
      const { attempt, startedAt, leaseUntil } = c.interrupted;
      await store.logInterrupted({
        event_id: event.id,
        site_id: c.delivery.site_id,
        endpoint_id: endpoint.id,
        event_name: event.name,
        url: endpoint.url,
        attempt,
        started_at: startedAt,
        duration_ms: Math.max(0, leaseUntil - startedAt),
      });
    },
    // Ended without an attempt: recovery sends it once the address is enabled again.
    unsentReason: ({ event, endpoint }) =>
      !event ? UNSENT.eventRemoved : !endpoint ? UNSENT.addressRemoved : endpoint.disabled_at !== null ? UNSENT.disabled : null,
    // The address (its secrets and switch time) was read at the claim; a claim older than
    // SWITCH_SETTLE_MS may have missed a switch the owner asked for, so it goes back unsent.
    stillSendable: (c, startedAt) => startedAt - ((c.delivery.lease_until ?? startedAt) - leaseMs) < SWITCH_SETTLE_MS,
    async send(c, startedAt) {
      const event = c.event!;
      const endpoint = c.endpoint!;
      let result: PostResult;
      let headers: Record<string, string> | undefined;
      try {
        headers = signedHeaders(secretOf(signingSecret(endpoint, startedAt)), event.name, event.id, c.attempt, event.body, startedAt);
        result = await transport.post(endpoint.url, event.body, headers);
      } catch (err) {
        result = { status: null, error: (err as Error).message, response: null } as PostResult;
      }
      return {
        result,
        row: (durationMs) => ({
          event_id: event.id,
          site_id: c.delivery.site_id,
          endpoint_id: endpoint.id,
          event_name: event.name,
          url: endpoint.url,
          attempt: c.attempt,
          started_at: startedAt,
          duration_ms: durationMs,
          status_code: result.status,
          error: result.status !== null && result.status >= 300 && result.status < 400 ? 'redirect not followed' : (result.error?.slice(0, 500) ?? null),
          response_excerpt: result.response,
          request_headers: headers ? JSON.stringify(headers) : null,
        }),
        // The address's host only: a URL may carry a receiver's token in its path or query.
        summary: { eventId: event.id, event: event.name, host: hostOfUrl(endpoint.url), status: result.status, error: result.error },
      };
    },
    afterEnded: (ended) => afterResults(ended.map(({ claim, status }) => ({ endpoint: claim.endpoint!, status }))),
    close: () => {
      if (!opts.transport) transport.close();
    },
  };

  return createDeliveryEngine({
    provider,
    logger,
    concurrency,
    perAddress: perEndpoint,
    attemptTimeoutMs: config.webhookTimeoutMs,
    leaseMs,
    pollMs: opts.pollMs ?? 1000,
    channel: opts.channel,
    owner: opts.owner,
  });
}
