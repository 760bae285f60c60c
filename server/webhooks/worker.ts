import fs from 'node:fs';
import os from 'node:os';
import type { Config } from '../config';
import type { Logger } from '../platform/logger';
import { decrypt, hmacHex, randomBase62 } from '../platform/crypto';
import { UNSENT, type Claimed, type EventStore, type Outcome } from './store';
import { createDeliveryTransport, DeliveryTransport, PostResult } from './transport';
import { retryPolicy } from './retry-policy';
import { createScheduler, heldPerAddress, ScheduledRow } from './scheduler';
import { createResultBatcher } from './result-batcher';
import { adaptivePoll, DELIVERY_KINDS, EventChannel } from './channel';
import { memoised } from '../platform/memo';
import type { Resolver } from './ssrf';
import { signingSecret, SWITCH_SETTLE_MS } from './address-rules';
import { AutoDisabledHook, createStreakKeeper, EndedDelivery } from './failure-streak';

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
   * `returned`: claimed ahead and given back unsent (it waited too long for its slot, or the worker stopped).
   */
  readonly stats: Record<'delivered' | 'failed' | 'retry' | 'stale' | 'returned', number>;
}

/** What a lease keeps beyond the attempt's time-out for writing its result. */
const RESULT_MARGIN_MS = 5_000;
/** Results recorded in one commit at most. */
const RESULTS_PER_COMMIT = 200;
/**
 * How long the first result of a group waits for others before the commit: a busy worker then
 * commits about fifty times a second instead of once per attempt. It only delays the log and the
 * delivery's state (the lease keeps RESULT_MARGIN_MS for that), never an attempt.
 */
const RESULT_GATHER_MS = 20;

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
 * A claimed delivery until its result is written. Every held row is excluded from this worker's
 * claims, so it is never sent twice alongside itself.
 */
interface Held extends ScheduledRow {
  claimed: Claimed;
  /** The state its result moves the delivery to, once `writing`. */
  next?: Outcome['next'];
  done: Promise<void>;
  settle: () => void;
}

type PendingResult = { held: Held; outcome: Outcome; report?: (applied: boolean) => void };

/**
 * The delivery worker. It claims due rows of `deliveries` in batches with a lease, sends each as
 * one HTTPS attempt, and records the results in groups (result-batcher.ts: one commit for the
 * attempts that ended within RESULT_GATHER_MS or while the previous commit ran): the log row and
 * the delivery's move to delivered, failed or a later retry (retry-policy.ts). Which rows start
 * when, and how many are claimed ahead of their POST, is scheduler.ts's. Any number of workers may
 * run on MySQL (claims skip each other's locked rows); on SQLite run one.
 *
 * A row claimed ahead that waited longer than its lease allows (the address slowed down) is given
 * back unsent, with its attempt uncounted.
 */
export function createDeliveryWorker(opts: WorkerOptions): DeliveryWorker {
  const { store, config, secretKey, logger } = opts;
  const concurrency = opts.concurrency ?? config.webhookConcurrency;
  const perEndpoint = opts.perEndpoint ?? config.webhookMaxInFlightPerAddress;
  const pollMs = opts.pollMs ?? 1000;
  const policy = retryPolicy(config.webhookRetryDelaysMs);
  const { maxAttempts } = policy;
  // The attempt's own time-out plus room to wait for a slot and to write its result; a lease that
  // ran out means the worker died.
  const leaseMs = opts.leaseMs ?? config.webhookTimeoutMs + 10_000;
  const scheduler = createScheduler<Held>({
    concurrency,
    perAddress: perEndpoint,
    // How long a row claimed ahead may wait for its slot and still finish inside its lease.
    maxWaitMs: Math.max(0, leaseMs - config.webhookTimeoutMs - RESULT_MARGIN_MS),
    resultsPerCommit: RESULTS_PER_COMMIT,
    now: Date.now,
  });
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

  const held = new Map<string, Held>(); // by event id, in claim order
  /** Opens a sealed signing secret, kept by its sealed text (a rotated secret has a new one). */
  const secretOf = memoised(1000, (sealed: string) => decrypt(secretKey, sealed));
  const results = createResultBatcher<PendingResult>({
    gatherMs: RESULT_GATHER_MS,
    maxPerFlush: RESULTS_PER_COMMIT,
    flush: recordGroup,
    onIdle: refill,
  });
  const stats = { delivered: 0, failed: 0, retry: 0, stale: 0, returned: 0 };
  const afterResults = createStreakKeeper({ store, logger, onAutoDisabled: opts.onAutoDisabled });
  let started = false;
  let stopped = false;
  let ticking: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let retryTimes: number[] = []; // our own scheduled retries, so pauses are kept to the millisecond, not the poll
  let leaveOutTimer: NodeJS.Timeout | undefined;

  function scheduleNext() {
    clearTimeout(timer);
    if (stopped) return;
    const now = Date.now();
    retryTimes = retryTimes.filter((t) => t > now);
    const delay = Math.max(0, Math.min(pollDelay, ...retryTimes.map((t) => t - now)));
    timer = setTimeout(tick, delay);
  }

  /**
   * Rows this worker holds that the database may show as due at `now`, so a claim must leave them
   * out: an attempt that outlived its lease (a database stall, a slow answer) is still being sent,
   * and a result that makes its row due again (given back, a retry due at once) may commit while the
   * claim runs, before the row is forgotten here. Every other held row is leased into the future
   * there; listing all of them made each claim statement kilobytes long.
   */
  function heldButDue(now: number): string[] {
    const ids: string[] = [];
    for (const [id, h] of held) {
      const leaseRanOut = (h.claimed.delivery.lease_until ?? 0) <= now;
      const dueAgain = h.next !== undefined && h.next.status === 'pending' && h.next.nextAttemptAt <= now;
      if (leaseRanOut || dueAgain) ids.push(id);
    }
    return ids;
  }

  /** Claims when there is room; runs one at a time, re-runs if woken meanwhile. */
  function tick(): void {
    if (stopped) return;
    if (ticking) {
      again = true;
      return;
    }
    let foundWork = false;
    // Addresses that filled up in this run, left out of a round that looks for other addresses' rows.
    const filledUp = new Set<string>();
    let leaveOut = false;
    ticking = (async () => {
      do {
        again = false;
        const limit = scheduler.claimLimit(held.size);
        if (limit <= 0) break;
        const now = Date.now();
        const { claimed, filled } = await store.claimDue({
          owner,
          now,
          leaseMs,
          limit,
          maxAttempts,
          held: heldPerAddress(held.values()),
          allowance: scheduler.allowance,
          leaveOut: leaveOut ? filledUp : undefined,
          exclude: heldButDue(now),
        });
        if (claimed.length > 0) foundWork = true;
        const taken = claimed.map(take);
        pump();
        scheduler.markBlocked(taken);
        // More may be due: the batch was full, or rows of addresses that filled up hid others (a
        // round that leaves those addresses out finds them, so other sites' events wait
        // LEAVE_OUT_EVERY_MS at most).
        for (const id of filled) filledUp.add(id);
        const next = scheduler.afterClaim(claimed.length, limit, filled.length);
        leaveOut = next.leaveOut;
        if (next.again) again = true;
        if (next.laterInMs !== undefined) {
          leaveOutTimer ??= setTimeout(() => {
            leaveOutTimer = undefined;
            tick();
          }, next.laterInMs);
        }
      } while (again && !stopped);
    })()
      .catch((err) =>
        logger.error(
          { err: { message: (err as Error).message, code: (err as { code?: string }).code } },
          'event delivery: claiming failed; retrying at the next poll',
        ),
      )
      .finally(() => {
        ticking = null;
        if (again && !stopped) return tick(); // woken after the last claim: look again now
        // Woken across processes: the full poll is only a safety net. Otherwise poll briskly while work keeps coming.
        pollDelay = opts.channel?.live() ? pollMs : poll.nextDelay(foundWork);
        scheduleNext();
      });
  }

  /** Claims again once the rows claimed ahead run low (a claim running now is not repeated for it). */
  function refill() {
    if (!stopped && scheduler.wantsMore() && !ticking) tick();
  }

  /** Takes a claimed row into the worker (queued, being prepared, or recorded at once) and returns it. */
  function take(c: Claimed): Held {
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    const h: Held = { claimed: c, address: c.delivery.endpoint_id, state: 'preparing', queuedAt: Date.now(), blocked: false, done, settle };
    held.set(c.delivery.event_id, h);
    const { event, endpoint } = c;
    if (c.exhausted) {
      // Given up: its round's budget went to interrupted attempts, the last of which is logged
      // first like any other, so the log holds every attempt the delivery counts.
      stats.failed++;
      afterInterrupted(h, () => record(h, { row: null, next: { status: 'failed', nextAttemptAt: Date.now(), now: Date.now() } }));
      return h;
    }
    const unsent = !event ? UNSENT.eventRemoved : !endpoint ? UNSENT.addressRemoved : endpoint.disabled_at !== null ? UNSENT.disabled : null;
    if (unsent) {
      // Ended without an attempt (recovery sends it once the address is enabled again): the claim's
      // count is taken back, so the next real send is the attempt after the last one sent.
      afterInterrupted(h, () => {
        const now = Date.now();
        record(h, { row: null, next: { status: 'failed', nextAttemptAt: now, now, attempts: c.attempt - 1, unsentReason: unsent } });
      });
      return h;
    }
    if (!c.interrupted) {
      scheduler.enqueue(h);
      return h;
    }
    afterInterrupted(h, () => {
      if (stopped) return giveBack(h); // stop() has given back the queue already
      scheduler.enqueue(h);
      pump();
      scheduler.markBlocked([h]);
    });
    return h;
  }

  /**
   * Runs `next` once the attempt a previous claim of this row never reported back is logged (at
   * once when there was none). If that cannot be logged, the row is let go: its lease runs out and
   * it is claimed again, interrupted attempt and all.
   */
  function afterInterrupted(h: Held, next: () => void): void {
    const { claimed: c } = h;
    const { event, endpoint } = c;
    if (!c.interrupted || !event || !endpoint) return next();
    const { attempt, startedAt, leaseUntil } = c.interrupted;
    store
      .logInterrupted({
        event_id: event.id,
        site_id: c.delivery.site_id,
        endpoint_id: endpoint.id,
        event_name: event.name,
        url: endpoint.url,
        attempt,
        started_at: startedAt,
        duration_ms: Math.max(0, leaseUntil - startedAt),
      })
      .then(next, (err) => {
        logger.error({ eventId: event.id, err: { message: (err as Error).message } }, 'event delivery: an interrupted attempt could not be logged');
        forget(h);
      });
  }

  /** Starts the POSTs that have a free slot, and gives back the rows that waited too long for theirs. */
  function pump() {
    if (stopped) return;
    for (const { row, action } of scheduler.turns()) {
      if (action === 'giveBack') giveBack(row);
      else void send(row);
    }
  }

  /** A claimed row goes back unsent: due now, its attempt uncounted. */
  function giveBack(h: Held) {
    const now = Date.now();
    stats.returned++;
    record(h, { row: null, next: { status: 'pending', nextAttemptAt: now, now, attempts: h.claimed.attempt - 1 } });
  }

  /** One attempt of a claimed delivery (its slot is taken by the scheduler's turn). */
  async function send(h: Held): Promise<void> {
    const { claimed: c } = h;
    const event = c.event!;
    const endpoint = c.endpoint!;
    const startedAt = Date.now();
    // The address (its secrets and switch time) was read at the claim; a claim older than
    // SWITCH_SETTLE_MS may have missed a switch the owner asked for, so it goes back unsent.
    if (startedAt - ((c.delivery.lease_until ?? startedAt) - leaseMs) >= SWITCH_SETTLE_MS) {
      scheduler.sent(h, 0);
      giveBack(h);
      pump();
      return;
    }
    let result: PostResult;
    let headers: Record<string, string> | undefined;
    try {
      headers = signedHeaders(secretOf(signingSecret(endpoint, startedAt)), event.name, event.id, c.attempt, event.body, startedAt);
      result = await transport.post(endpoint.url, event.body, headers);
    } catch (err) {
      result = { status: null, error: (err as Error).message, response: null } as PostResult;
    }
    const finishedAt = Date.now();
    const durationMs = finishedAt - startedAt;
    scheduler.sent(h, durationMs);

    const { outcome, status, nextAttemptAt } = policy.decide(result, c.attempt - c.delivery.round_base, finishedAt);
    const row = {
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
    };
    record(h, { row, next: { status, nextAttemptAt, now: finishedAt } }, (applied) => {
      // The address's host only: a URL may carry a receiver's token in its path or query.
      const summary = {
        eventId: event.id,
        event: event.name,
        attempt: c.attempt,
        host: new URL(endpoint.url).host,
        status: result.status,
        error: result.error,
        durationMs,
        outcome,
      };
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
    });
    pump(); // the address has a free slot while this result is written
    refill();
  }

  /** Queues a claim's result for the next commit. */
  function record(h: Held, next: Omit<Outcome, 'eventId' | 'attempt'>, report?: (applied: boolean) => void) {
    h.state = 'writing';
    h.next = next.next;
    results.add({ held: h, outcome: { eventId: h.claimed.delivery.event_id, attempt: h.claimed.attempt, ...next }, report });
  }

  /** Writes one group of results in one commit; the rows are forgotten either way. */
  async function recordGroup(group: PendingResult[]): Promise<void> {
    try {
      const applied = await store.finishAttempts(
        owner,
        group.map((r) => r.outcome),
      );
      group.forEach((r, i) => r.report?.(applied[i]));
      const ended: EndedDelivery[] = [];
      group.forEach((r, i) => {
        const { status } = r.outcome.next;
        if (applied[i] && r.outcome.row && (status === 'delivered' || status === 'failed')) ended.push({ endpoint: r.held.claimed.endpoint!, status });
      });
      if (ended.length) await afterResults(ended);
    } catch (err) {
      // The leases run out and the rows are tried again: nothing is lost.
      logger.error({ events: group.length, err: { message: (err as Error).message } }, 'event delivery: attempts could not be recorded');
    }
    for (const r of group) forget(r.held);
  }

  function forget(h: Held) {
    held.delete(h.claimed.delivery.event_id);
    h.settle();
  }

  return {
    owner,
    stats,
    start() {
      if (started) return;
      started = true;
      // Outbox events only: an inbox row or a typing signal can never make a delivery due.
      opts.channel?.subscribe(() => tick(), DELIVERY_KINDS);
      tick();
    },
    wake() {
      if (started) tick();
    },
    async stop() {
      stopped = true;
      results.stop();
      clearTimeout(timer);
      clearTimeout(leaveOutTimer);
      await ticking;
      // Rows claimed ahead go back unsent; the POSTs in flight end (at most the time-out) and are recorded.
      for (const h of scheduler.drain()) giveBack(h);
      await Promise.allSettled([...held.values()].map((h) => h.done));
      await results.idle();
      if (!opts.transport) transport.close();
    },
  };
}
