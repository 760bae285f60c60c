import fs from 'node:fs';
import os from 'node:os';
import type { Config } from '../config';
import type { Logger } from '../platform/logger';
import { decrypt, hmacHex, randomBase62 } from '../platform/crypto';
import type { Claimed, DeliveryStatus, EventStore } from './store';
import { createDeliveryTransport, DeliveryTransport, PostResult } from './transport';
import { adaptivePoll, WakeChannel } from './wake';
import type { Resolver } from './ssrf';

export interface WorkerOptions {
  store: EventStore;
  config: Pick<Config, 'webhookAllowPrivateNetworks' | 'webhookCaFile' | 'webhookTimeoutMs' | 'webhookRetryDelaysMs' | 'webhookConcurrency' | 'webhookMaxInFlightPerAddress'>;
  /** services.keys.webhookSecrets: opens the stored signing secrets. */
  secretKey: Buffer;
  logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Deliveries in flight at once, over all sites (default WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** In flight at once to one address, so one slow receiver cannot take every slot (default WEBHOOK_MAX_IN_FLIGHT_PER_ADDRESS). */
  perEndpoint?: number;
  /**
   * The longest pause between looks for due rows written or rescheduled by other processes. Without
   * a live wake channel the worker looks every 50 ms while it finds work and backs off to this.
   */
  pollMs?: number;
  /** Wakes this worker when any process commits events (Redis pub/sub with REDIS_URL). */
  wake?: WakeChannel;
  /** The HTTPS client of the attempts; built from the config when not given (tests pass their own). */
  transport?: DeliveryTransport;
  /** How long a claim is ours; after it, another worker may retry the row. */
  leaseMs?: number;
  resolve?: Resolver;
  owner?: string;
}

export interface DeliveryWorker {
  start(): void;
  /** Something was just written to the outbox: look now instead of at the next poll. */
  wake(): void;
  /** Stops claiming, lets the attempts in flight finish (at most the attempt time-out), then resolves. */
  stop(): Promise<void>;
  readonly owner: string;
  /**
   * Attempts this worker finished, by outcome (for tests and diagnostics). `stale`: the attempt
   * outlived its lease and a newer claim owned the row by then, so its result was only logged.
   */
  readonly stats: Record<'delivered' | 'failed' | 'retry' | 'stale', number>;
}

const CLEANUP_EVERY_MS = 60 * 60 * 1000;
const RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

/** What an attempt's result means for the delivery. */
export function outcomeOf(result: PostResult): 'delivered' | 'failed' | 'retry' {
  if (result.status !== null) {
    if (result.status >= 200 && result.status < 300) return 'delivered';
    if (result.status >= 300 && result.status < 500) return 'failed'; // 3xx is not followed; 4xx is the receiver's "no"
    return 'retry';
  }
  // The address is refused by policy; trying again changes nothing. Redelivery remains possible.
  if (result.error === 'blocked address') return 'failed';
  return 'retry'; // time-out, reset, refused, TLS, DNS: may pass next time
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

/**
 * The delivery worker. It claims due rows of `deliveries` with a lease, sends each as one HTTPS
 * attempt, logs the attempt and moves the row to delivered, failed or a later retry. Any number of
 * workers may run on MySQL (claims skip each other's locked rows); on SQLite run one.
 */
export function createDeliveryWorker(opts: WorkerOptions): DeliveryWorker {
  const { store, config, secretKey, logger } = opts;
  const concurrency = opts.concurrency ?? config.webhookConcurrency;
  const perEndpoint = opts.perEndpoint ?? config.webhookMaxInFlightPerAddress;
  const pollMs = opts.pollMs ?? 1000;
  const delays = config.webhookRetryDelaysMs;
  const maxAttempts = delays.length + 1;
  // The attempt's own time-out plus room to write its result; a lease that ran out means the worker died.
  const leaseMs = opts.leaseMs ?? config.webhookTimeoutMs + 10_000;
  const owner = (opts.owner ?? `${os.hostname()}:${process.pid}:${randomBase62(6)}`).slice(0, 64);
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
  const poll = adaptivePoll({ minMs: Math.min(50, pollMs), maxMs: pollMs });
  let pollDelay = pollMs;

  /**
   * Claimed deliveries until their result is written. `sending`: from the claim until its POST
   * ended; only these count against an address's cap, because writing the result to the database
   * puts no load on the receiver and must not hold its slot.
   */
  type Slot = { endpointId: string; sending: boolean; done?: Promise<void> };
  const inFlight = new Map<string, Slot>();
  const stats = { delivered: 0, failed: 0, retry: 0, stale: 0 };
  let started = false;
  let stopped = false;
  let ticking: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let cleanupTimer: NodeJS.Timeout | undefined;
  let retryTimes: number[] = []; // our own scheduled retries, so pauses are kept to the millisecond, not the poll

  function scheduleNext() {
    clearTimeout(timer);
    if (stopped) return;
    const now = Date.now();
    retryTimes = retryTimes.filter((t) => t > now);
    const delay = Math.max(0, Math.min(pollDelay, ...retryTimes.map((t) => t - now)));
    timer = setTimeout(tick, delay);
  }

  function inFlightByEndpoint(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const { endpointId, sending } of inFlight.values()) if (sending) counts.set(endpointId, (counts.get(endpointId) ?? 0) + 1);
    return counts;
  }

  /** Claims as many due rows as there are free slots; runs one at a time, re-runs if woken meanwhile. */
  function tick(): void {
    if (stopped) return;
    if (ticking) {
      again = true;
      return;
    }
    let foundWork = false;
    ticking = (async () => {
      do {
        again = false;
        const free = concurrency - inFlight.size;
        if (free <= 0) break;
        const { claimed, skipped } = await store.claimDue({
          owner,
          now: Date.now(),
          leaseMs,
          limit: free,
          maxAttempts,
          inFlight: inFlightByEndpoint(),
          perEndpoint,
          // An attempt of ours can outlast its lease (a database stall, a slow answer): the row then
          // looks due, but it is still being sent.
          exclude: [...inFlight.keys()],
        });
        if (claimed.length > 0) foundWork = true;
        for (const c of claimed) run(c);
        // More may be due: the batch was full, or rows of an address that just filled up hid others
        // (the next round leaves that address out).
        if (claimed.length === free || skipped > 0) again = true;
      } while (again && !stopped);
    })()
      .catch((err) => logger.error({ err: { message: (err as Error).message, code: (err as { code?: string }).code } }, 'event delivery: claiming failed; retrying at the next poll'))
      .finally(() => {
        ticking = null;
        if (again && !stopped) return tick(); // woken after the last claim: look again now
        // Woken across processes: the full poll is only a safety net. Otherwise poll briskly while work keeps coming.
        pollDelay = opts.wake?.live() ? pollMs : poll.nextDelay(foundWork);
        scheduleNext();
      });
  }

  function run(c: Claimed) {
    const slot: Slot = { endpointId: c.delivery.endpoint_id, sending: true };
    inFlight.set(c.delivery.event_id, slot);
    const addressFree = () => {
      if (!slot.sending) return;
      slot.sending = false;
      tick(); // the address has room again while this result is written
    };
    slot.done = deliver(c, addressFree)
      .catch((err) => {
        // The lease runs out and the row is tried again: nothing is lost.
        logger.error({ eventId: c.delivery.event_id, err: { message: (err as Error).message } }, 'event delivery: attempt could not be recorded');
      })
      .finally(() => {
        slot.sending = false;
        inFlight.delete(c.delivery.event_id);
        tick(); // a slot is free
      });
  }

  /** One attempt of a claimed delivery; `addressFree` is called once its POST has ended. */
  async function deliver(c: Claimed, addressFree: () => void): Promise<void> {
    const { delivery } = c;
    const { event, endpoint } = await store.loadForDelivery(delivery.event_id, delivery.endpoint_id);
    const claim = { owner, attempt: c.attempt };
    if (!event || !endpoint) {
      await store.finishAttempt(null, delivery.event_id, claim, { status: 'failed', nextAttemptAt: Date.now(), now: Date.now() });
      return;
    }
    const base = { event_id: event.id, site_id: delivery.site_id, endpoint_id: endpoint.id, event_name: event.name, url: endpoint.url };
    if (c.interrupted) {
      const { attempt, startedAt, leaseUntil } = c.interrupted;
      await store.logInterrupted({ ...base, attempt, started_at: startedAt, duration_ms: Math.max(0, leaseUntil - startedAt) });
    }
    if (c.exhausted) {
      await store.finishAttempt(null, event.id, claim, { status: 'failed', nextAttemptAt: Date.now(), now: Date.now() });
      stats.failed++;
      return;
    }

    const startedAt = Date.now();
    const secret = decrypt(secretKey, endpoint.secret_encrypted);
    const headers = signedHeaders(secret, event.name, event.id, c.attempt, event.body, startedAt);
    const result = await transport.post(endpoint.url, Buffer.from(event.body, 'utf8'), headers);
    const finishedAt = Date.now();
    addressFree();

    let outcome = outcomeOf(result);
    const roundAttempt = c.attempt - delivery.round_base;
    if (outcome === 'retry' && roundAttempt >= maxAttempts) outcome = 'failed';
    const status: DeliveryStatus = outcome === 'retry' ? 'pending' : outcome;
    const nextAttemptAt = outcome === 'retry' ? finishedAt + delays[Math.min(roundAttempt - 1, delays.length - 1)] : finishedAt;

    const applied = await store.finishAttempt(
      {
        ...base,
        attempt: c.attempt,
        started_at: startedAt,
        duration_ms: finishedAt - startedAt,
        status_code: result.status,
        error: result.status !== null && result.status >= 300 && result.status < 400 ? 'redirect not followed' : (result.error?.slice(0, 500) ?? null),
        response_excerpt: result.response,
      },
      event.id,
      claim,
      { status, nextAttemptAt, now: finishedAt },
    );
    // The address's host only: a URL may carry a receiver's token in its path or query.
    const summary = { eventId: event.id, event: event.name, attempt: c.attempt, host: new URL(endpoint.url).host, status: result.status, error: result.error, durationMs: finishedAt - startedAt, outcome };
    if (!applied) {
      stats.stale++;
      logger.warn(summary, 'event delivery attempt outlived its lease; a newer claim owns the delivery, so this result is logged only');
      return;
    }
    stats[outcome]++;
    if (outcome === 'retry') {
      retryTimes.push(nextAttemptAt);
      if (!ticking) scheduleNext();
    }
    logger.info(summary, 'event delivery attempt');
  }

  async function cleanup() {
    try {
      const removed = await store.removeOlderThan(Date.now() - RETENTION_MS);
      if (removed.attempts || removed.deliveries || removed.events) logger.info({ removed }, 'event delivery: removed log rows older than 30 days');
    } catch (err) {
      logger.warn({ err: { message: (err as Error).message } }, 'event delivery: cleanup failed; trying again later');
    }
  }

  return {
    owner,
    stats,
    start() {
      if (started) return;
      started = true;
      opts.wake?.subscribe(() => tick());
      tick();
      void cleanup();
      cleanupTimer = setInterval(() => void cleanup(), CLEANUP_EVERY_MS);
      cleanupTimer.unref();
    },
    wake() {
      if (started) tick();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      clearInterval(cleanupTimer);
      await ticking;
      await Promise.allSettled([...inFlight.values()].map((f) => f.done));
      if (!opts.transport) transport.close();
    },
  };
}
