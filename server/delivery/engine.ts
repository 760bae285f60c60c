import os from 'node:os';
import type { Logger } from '../platform/logger';
import { randomBase62 } from '../platform/crypto';
import type { DeliveryStatus, RetryDecision } from './retry-schedule';
import { createScheduler, heldPerAddress, ScheduledRow } from './scheduler';
import { createResultBatcher } from './result-batcher';
import { adaptivePoll, ChannelKind, EventChannel } from './channel';

/**
 * One claimed delivery as the engine sees it, whatever its kind: `key` names the delivery (an
 * event id, an email id), `address` is what its slots are capped by (an event address, the mail
 * relay). The provider's claim carries what its attempt needs besides.
 */
export interface EngineClaim {
  key: string;
  address: string;
  /** The attempt number this claim sends (already counted by the claim). */
  attempt: number;
  /** The lease this claim holds, in ms since the epoch. */
  leaseUntil: number | null;
  /** Attempts before the current round (a redelivery starts a round): the budget counts from here. */
  roundBase: number;
  /** A previous claim never reported back: its worker stopped mid-attempt. */
  interrupted: { attempt: number; startedAt: number; leaseUntil: number } | null;
  /** The round's budget was used up by interrupted attempts: give up instead of sending. */
  exhausted: boolean;
}

/**
 * A delivery's state after a claim. `attempts`: when the claim sent nothing (given back, or ended
 * unsent), the count before it. `unsentReason`: the claim ended the delivery failed without sending.
 */
export interface NextState {
  status: DeliveryStatus;
  nextAttemptAt: number;
  now: number;
  attempts?: number;
  unsentReason?: string;
}

/** One claim's result: its log row (none when nothing was sent) and the delivery's next state. */
export interface EngineOutcome<Row> {
  key: string;
  /** The attempt number the claim sent. */
  attempt: number;
  row: Row | null;
  next: NextState;
}

/** What a claim may take: the scheduler's limits, and the rows this worker holds (never claimed twice). */
export interface ClaimRequest {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
  maxAttempts: number;
  held: ReadonlyMap<string, number>;
  allowance: (address: string) => number;
  /** Addresses none of whose rows are claimed this time. */
  leaveOut?: Iterable<string>;
  /** Keys this worker holds. */
  exclude?: Iterable<string>;
}

/** One attempt as its provider made it: the result the retry schedule reads, and how to log it. */
export interface SentAttempt<Result, Row> {
  result: Result;
  /** The log row of the attempt, given how long it took. */
  row(durationMs: number, outcome: RetryDecision['outcome']): Row;
  /** What the log line of the attempt says (never a secret, never a whole address that may carry one). */
  summary: Record<string, unknown>;
}

/**
 * The kind-specific half of a delivery worker: where its rows are claimed and recorded, what one
 * attempt does, and how a result reads. Events sign and POST (webhooks/worker.ts); emails render
 * and hand over to the mail relay (mail/worker.ts).
 */
export interface DeliveryProvider<C extends EngineClaim, Result, Row> {
  /** Names the kind in log lines ("event delivery"). */
  label: string;
  /** The channel's kinds that may make one of its rows due. */
  kinds: readonly ChannelKind[];
  schedule: { maxAttempts: number; decide(result: Result, roundAttempt: number, now: number): RetryDecision };
  claimDue(req: ClaimRequest): Promise<{ claimed: C[]; filled: string[] }>;
  /**
   * Whether any row is due at `now`: one cheap read without locks, made between the polls of a
   * worker nobody wakes, so an event written after a quiet spell waits PROBE_MS, not the full poll.
   */
  anyDue?(now: number): Promise<boolean>;
  finishAttempts(owner: string, outcomes: EngineOutcome<Row>[]): Promise<boolean[]>;
  /**
   * Logs the attempt a previous claim never reported back (`claim.interrupted`), unless its real
   * result is logged already; resolves at once when there is nothing left to log it against.
   */
  logInterrupted(claim: C): Promise<void>;
  /** Why the claim ends failed without an attempt (what it sends was removed meanwhile), or null. */
  unsentReason(claim: C): string | null;
  /** False when the claim, read at `claimedAt`, is too old to send at `startedAt`: it goes back unsent. */
  stillSendable?(claim: C, startedAt: number): boolean;
  send(claim: C, startedAt: number): Promise<SentAttempt<Result, Row>>;
  /** Runs after a group of results is committed, with the deliveries that ended after an attempt. */
  afterEnded?(ended: { claim: C; status: 'delivered' | 'failed' }[]): Promise<void>;
  /** Releases what the provider opened (connections), once the worker has stopped. */
  close?(): void;
}

export interface EngineOptions<C extends EngineClaim, Result, Row> {
  provider: DeliveryProvider<C, Result, Row>;
  logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Attempts in flight at once, over all addresses. */
  concurrency: number;
  /** In flight at once to one address, so one slow receiver cannot take every slot. */
  perAddress: number;
  /** How long one attempt may take at most (its own time-out). */
  attemptTimeoutMs: number;
  /** How long a claim is ours; after it, another worker may retry the row. */
  leaseMs: number;
  /** The longest pause between looks for due rows written or rescheduled by other processes. */
  pollMs: number;
  /** Wakes this worker when any process commits rows of its kinds (Redis pub/sub with REDIS_URL). */
  channel?: Pick<EventChannel, 'subscribe' | 'live'>;
  owner?: string;
}

/** What a worker of scheduled jobs takes beyond its provider (defaults: a 60 s lease, a 5 s poll). */
export interface JobWorkerOptions {
  logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  leaseMs?: number;
  pollMs?: number;
  owner?: string;
}

/**
 * A worker of scheduled jobs kept in the database (the agents' alert checks, the visitors' reply
 * notices): no remote address caps them and nobody wakes them (they fall due minutes after they are
 * written), so a few at a time, each within 30 s, found by the poll.
 */
export function createJobWorker<C extends EngineClaim, Result, Row>(provider: DeliveryProvider<C, Result, Row>, opts: JobWorkerOptions): DeliveryWorker {
  return createDeliveryEngine({
    provider,
    logger: opts.logger,
    concurrency: 4,
    perAddress: 4,
    attemptTimeoutMs: 30_000,
    leaseMs: opts.leaseMs ?? 60_000,
    pollMs: opts.pollMs ?? 5_000,
    owner: opts.owner,
  });
}

export interface DeliveryWorker {
  start(): void;
  /** Something was just written for it: look now instead of at the next poll. */
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
export const RESULT_MARGIN_MS = 5_000;
/** Results recorded in one commit at most. */
const RESULTS_PER_COMMIT = 200;
/**
 * How long the first result of a group waits for others before the commit: a busy worker then
 * commits about fifty times a second instead of once per attempt. It only delays the log and the
 * delivery's state (the lease keeps RESULT_MARGIN_MS for that), never an attempt.
 */
const RESULT_GATHER_MS = 20;

/**
 * How often a worker that nobody wakes (no live channel) asks whether anything is due while its
 * poll has backed off: the bound on event to first attempt after a quiet spell, at the cost of
 * one indexed single-row read per period (20 a second) instead of a claim's transaction.
 */
export const PROBE_MS = 50;
/** After a failed claim (the database away or busy), the least wait before the next, so a due retry does not make a busy loop of it. */
export const CLAIM_FAILED_PAUSE_MS = 1_000;

/** A worker's default name: the host and process, unique per worker. */
export function workerOwner(owner?: string): string {
  return (owner ?? `${os.hostname()}:${process.pid}:${randomBase62(6)}`).slice(0, 64);
}

/**
 * A claimed delivery until its result is written. Every held row is excluded from this worker's
 * claims, so it is never sent twice alongside itself.
 */
interface Held<C> extends ScheduledRow {
  claim: C;
  /** The state its result moves the delivery to, once `writing`. */
  next?: NextState;
  done: Promise<void>;
  settle: () => void;
}

type PendingResult<C, Row> = { held: Held<C>; outcome: EngineOutcome<Row>; report?: (applied: boolean) => void };

/**
 * The delivery engine, the same for every kind. It claims due rows in batches with a lease, makes
 * one attempt of each through its provider, and records the results in groups (result-batcher.ts:
 * one commit for the attempts that ended within RESULT_GATHER_MS or while the previous commit
 * ran): the log row and the delivery's move to delivered, failed or a later retry (the provider's
 * schedule). Which rows start when, and how many are claimed ahead of their attempt, is
 * scheduler.ts's. Any number of workers may run on MySQL (claims skip each other's locked rows);
 * on SQLite run one.
 *
 * A row claimed ahead that waited longer than its lease allows (the address slowed down) is given
 * back unsent, with its attempt uncounted.
 */
export function createDeliveryEngine<C extends EngineClaim, Result, Row>(opts: EngineOptions<C, Result, Row>): DeliveryWorker {
  const { provider, logger, concurrency, perAddress, leaseMs, pollMs } = opts;
  const { label } = provider;
  const { maxAttempts } = provider.schedule;
  const scheduler = createScheduler<Held<C>>({
    concurrency,
    perAddress,
    // How long a row claimed ahead may wait for its slot and still finish inside its lease.
    maxWaitMs: Math.max(0, leaseMs - opts.attemptTimeoutMs - RESULT_MARGIN_MS),
    resultsPerCommit: RESULTS_PER_COMMIT,
    now: Date.now,
  });
  const owner = workerOwner(opts.owner);
  const poll = adaptivePoll({ minMs: Math.min(50, pollMs), maxMs: pollMs });
  let pollDelay = pollMs;

  const held = new Map<string, Held<C>>(); // by key, in claim order
  const results = createResultBatcher<PendingResult<C, Row>>({
    gatherMs: RESULT_GATHER_MS,
    maxPerFlush: RESULTS_PER_COMMIT,
    flush: recordGroup,
    onIdle: refill,
  });
  const stats = { delivered: 0, failed: 0, retry: 0, stale: 0, returned: 0 };
  let started = false;
  let stopped = false;
  let ticking: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let retryTimes: number[] = []; // our own scheduled retries, so pauses are kept to the millisecond, not the poll
  // The `now` of the last claim that ran to its end: a retry due by then was looked for. A retry is
  // forgotten once a claim has looked at or after its time, not when its time passes: a claim that
  // started just before it (woken by something else) and ended after it did not see it due.
  let claimedUpTo = 0;
  let claimFailed = false; // the last claim failed: wait a moment before the next, however due a retry is
  let leaveOutTimer: NodeJS.Timeout | undefined;
  let probeTimer: NodeJS.Timeout | undefined;
  let pollAt = 0; // when the next regular look runs
  const probeMs = Math.min(PROBE_MS, pollMs);
  // A probe saw a due row that the claim it started did not take (another worker's, locked for a
  // moment): no more probes until the next regular look, so such a row cannot make us claim 20 times a second.
  let probeMuted = false;
  let probeTick = false;
  let probing = false; // a probe's read is out: the next is scheduled when it returns

  function scheduleNext() {
    clearTimeout(timer);
    if (stopped) return;
    const now = Date.now();
    retryTimes = retryTimes.filter((t) => t > claimedUpTo);
    let delay = Math.max(0, Math.min(pollDelay, ...retryTimes.map((t) => t - now)));
    if (claimFailed) delay = Math.max(delay, Math.min(pollDelay, CLAIM_FAILED_PAUSE_MS));
    pollAt = now + delay;
    timer = setTimeout(() => {
      probeMuted = false;
      tick();
    }, delay);
    scheduleProbe();
  }

  /** Between regular looks longer apart than PROBE_MS, and while nobody wakes us: a probe every PROBE_MS. */
  function scheduleProbe() {
    clearTimeout(probeTimer);
    if (stopped || probing || probeMuted || !provider.anyDue || opts.channel?.live()) return;
    if (pollAt - Date.now() <= probeMs) return;
    probeTimer = setTimeout(() => void probe(), probeMs);
  }

  async function probe(): Promise<void> {
    if (stopped || ticking) return; // the running look schedules what follows it
    let due = false;
    probing = true;
    try {
      due = await provider.anyDue!(Date.now());
    } catch (err) {
      // The regular poll still looks; the probe only shortens the wait.
      logger.debug({ err: { message: (err as Error).message } }, `${label}: probing for due rows failed`);
    } finally {
      probing = false;
    }
    if (stopped || ticking) return;
    if (!due) return scheduleProbe();
    probeTick = true;
    tick();
  }

  /**
   * Rows this worker holds that the database may show as due at `now`, so a claim must leave them
   * out: an attempt that outlived its lease (a database stall, a slow answer) is still being sent,
   * and a result that makes its row due again (given back, a retry due at once) may commit while the
   * claim runs, before the row is forgotten here. Every other held row is leased into the future
   * there; listing all of them made each claim statement kilobytes long.
   */
  function heldButDue(now: number): string[] {
    const keys: string[] = [];
    for (const [key, h] of held) {
      const leaseRanOut = (h.claim.leaseUntil ?? 0) <= now;
      const dueAgain = h.next !== undefined && h.next.status === 'pending' && h.next.nextAttemptAt <= now;
      if (leaseRanOut || dueAgain) keys.push(key);
    }
    return keys;
  }

  /** Claims when there is room; runs one at a time, re-runs if woken meanwhile. */
  function tick(): void {
    if (stopped) return;
    if (ticking) {
      again = true;
      return;
    }
    let foundWork = false;
    const fromProbe = probeTick;
    probeTick = false;
    // Addresses that filled up in this run, left out of a round that looks for other addresses' rows.
    const filledUp = new Set<string>();
    let leaveOut = false;
    ticking = (async () => {
      do {
        again = false;
        const limit = scheduler.claimLimit(held.size);
        const now = Date.now();
        if (limit <= 0) {
          // No room for a row: the retries due by now are claimed when a slot frees (refill), so
          // their timer is done; kept, it would wake us at once, again and again, until then.
          claimedUpTo = now;
          break;
        }
        const { claimed, filled } = await provider.claimDue({
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
        claimedUpTo = now;
        claimFailed = false;
        if (claimed.length > 0) foundWork = true;
        const taken = claimed.map(take);
        pump();
        scheduler.markBlocked(taken);
        // More may be due: the batch was full, or rows of addresses that filled up hid others (a
        // round that leaves those addresses out finds them, so other addresses' rows wait
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
      .catch((err) => {
        claimFailed = true;
        logger.error(
          { err: { message: (err as Error).message, code: (err as { code?: string }).code } },
          `${label}: claiming failed; retrying at the next poll`,
        );
      })
      .finally(() => {
        ticking = null;
        if (again && !stopped) return tick(); // woken after the last claim: look again now
        // Woken across processes: the full poll is only a safety net. Otherwise poll briskly while work keeps coming.
        pollDelay = opts.channel?.live() ? pollMs : poll.nextDelay(foundWork);
        if (fromProbe && !foundWork) probeMuted = true;
        scheduleNext();
      });
  }

  /** Claims again once the rows claimed ahead run low (a claim running now is not repeated for it). */
  function refill() {
    if (!stopped && scheduler.wantsMore() && !ticking) tick();
  }

  /** Takes a claimed row into the worker (queued, being prepared, or recorded at once) and returns it. */
  function take(c: C): Held<C> {
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    const h: Held<C> = { claim: c, address: c.address, state: 'preparing', queuedAt: Date.now(), blocked: false, done, settle };
    held.set(c.key, h);
    if (c.exhausted) {
      // Given up: its round's budget went to interrupted attempts, the last of which is logged
      // first like any other, so the log holds every attempt the delivery counts.
      stats.failed++;
      afterInterrupted(h, () => record(h, { row: null, next: { status: 'failed', nextAttemptAt: Date.now(), now: Date.now() } }));
      return h;
    }
    const unsent = provider.unsentReason(c);
    if (unsent) {
      // Ended without an attempt: the claim's count is taken back, so the next real send (after a
      // recovery) is the attempt after the last one sent.
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
  function afterInterrupted(h: Held<C>, next: () => void): void {
    const { claim: c } = h;
    if (!c.interrupted) return next();
    provider.logInterrupted(c).then(next, (err) => {
      logger.error({ key: c.key, err: { message: (err as Error).message } }, `${label}: an interrupted attempt could not be logged`);
      forget(h);
    });
  }

  /** Starts the attempts that have a free slot, and gives back the rows that waited too long for theirs. */
  function pump() {
    if (stopped) return;
    for (const { row, action } of scheduler.turns()) {
      if (action === 'giveBack') giveBack(row);
      else void send(row);
    }
  }

  /** A claimed row goes back unsent: due now, its attempt uncounted. */
  function giveBack(h: Held<C>) {
    const now = Date.now();
    stats.returned++;
    record(h, { row: null, next: { status: 'pending', nextAttemptAt: now, now, attempts: h.claim.attempt - 1 } });
  }

  /** One attempt of a claimed delivery (its slot is taken by the scheduler's turn). */
  async function send(h: Held<C>): Promise<void> {
    const { claim: c } = h;
    const startedAt = Date.now();
    if (provider.stillSendable && !provider.stillSendable(c, startedAt)) {
      scheduler.sent(h, 0);
      giveBack(h);
      pump();
      return;
    }
    const sent = await provider.send(c, startedAt);
    const finishedAt = Date.now();
    const durationMs = finishedAt - startedAt;
    scheduler.sent(h, durationMs);

    const { outcome, status, nextAttemptAt } = provider.schedule.decide(sent.result, c.attempt - c.roundBase, finishedAt);
    record(h, { row: sent.row(durationMs, outcome), next: { status, nextAttemptAt, now: finishedAt } }, (applied) => {
      const summary = { ...sent.summary, attempt: c.attempt, durationMs, outcome };
      if (!applied) {
        stats.stale++;
        logger.warn(summary, `${label} attempt outlived its lease; a newer claim owns the delivery, so this result is logged only`);
        return;
      }
      stats[outcome]++;
      if (outcome === 'retry') {
        retryTimes.push(nextAttemptAt);
        if (!ticking) scheduleNext();
      }
      logger.info(summary, `${label} attempt`);
    });
    pump(); // the address has a free slot while this result is written
    refill();
  }

  /** Queues a claim's result for the next commit. */
  function record(h: Held<C>, next: Omit<EngineOutcome<Row>, 'key' | 'attempt'>, report?: (applied: boolean) => void) {
    h.state = 'writing';
    h.next = next.next;
    results.add({ held: h, outcome: { key: h.claim.key, attempt: h.claim.attempt, ...next }, report });
  }

  /** Writes one group of results in one commit; the rows are forgotten either way. */
  async function recordGroup(group: PendingResult<C, Row>[]): Promise<void> {
    try {
      const applied = await provider.finishAttempts(
        owner,
        group.map((r) => r.outcome),
      );
      group.forEach((r, i) => r.report?.(applied[i]));
      const ended: { claim: C; status: 'delivered' | 'failed' }[] = [];
      group.forEach((r, i) => {
        const { status } = r.outcome.next;
        if (applied[i] && r.outcome.row && (status === 'delivered' || status === 'failed')) ended.push({ claim: r.held.claim, status });
      });
      if (ended.length && provider.afterEnded) await provider.afterEnded(ended);
    } catch (err) {
      // The leases run out and the rows are tried again: nothing is lost.
      logger.error({ deliveries: group.length, err: { message: (err as Error).message } }, `${label}: attempts could not be recorded`);
    }
    for (const r of group) forget(r.held);
  }

  function forget(h: Held<C>) {
    held.delete(h.claim.key);
    h.settle();
  }

  return {
    owner,
    stats,
    start() {
      if (started) return;
      started = true;
      // Only the kinds that can make one of our rows due: an inbox row or a typing signal never does.
      opts.channel?.subscribe(() => tick(), provider.kinds);
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
      clearTimeout(probeTimer);
      await ticking;
      // Rows claimed ahead go back unsent; the attempts in flight end (at most the time-out) and are recorded.
      for (const h of scheduler.drain()) giveBack(h);
      await Promise.allSettled([...held.values()].map((h) => h.done));
      await results.idle();
      provider.close?.();
    },
  };
}
