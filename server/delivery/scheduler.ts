/**
 * The delivery worker's scheduling rules, free of I/O: which claimed rows start their POST now,
 * how many rows of an address may be claimed ahead of their POST, and when to claim again. The
 * worker (worker.ts) owns the rows and does the sending; the clock is passed in, so tests drive it.
 */

/** The most rows of one address claimed ahead of their POST. */
export const AHEAD_PER_ADDRESS_MAX = 256;
/**
 * A claim round that leaves full addresses out (to find other addresses' rows hidden behind their
 * backlog) walks that backlog in the due index: it runs at most this often.
 */
export const LEAVE_OUT_EVERY_MS = 250;

/**
 * A claimed delivery as the scheduler sees it. `preparing`: its interrupted predecessor is being
 * logged; `queued`: claimed ahead, waiting for a free slot of its address; `sending`: its POST is
 * open; `writing`: its result waits for the next commit. Only `sending` rows count against the
 * address's cap (writing a result puts no load on the receiver).
 */
export interface ScheduledRow {
  readonly address: string;
  state: 'preparing' | 'queued' | 'sending' | 'writing';
  queuedAt: number;
  /** Its first turn found no free slot: it is waiting, and its wait counts against its lease. */
  blocked: boolean;
}

export interface SchedulerOptions {
  /** POSTs open at once over all addresses. */
  concurrency: number;
  /** POSTs open at once to one address. */
  perAddress: number;
  /** How long a row claimed ahead may wait for its slot and still finish inside its lease (0: no claiming ahead). */
  maxWaitMs: number;
  /** Results written in one commit at most: rows waiting for a stalled commit are not claimed past. */
  resultsPerCommit: number;
  now: () => number;
}

/** What to do with a row whose turn came: start its POST, or give it back unsent (it waited too long). */
export type Turn<R> = { row: R; action: 'send' | 'giveBack' };

/**
 * Rows of the locking read that one claim may take: at most `allowance(address) - held(address)`
 * of each address, in the read's order. `filled`: the addresses whose rows were left for a later
 * round, when the read came back full (`candidates.length >= limit`), since only then may rows of
 * other addresses be hidden behind theirs.
 */
export function takeWithinAllowance<T extends { endpoint_id: string }>(
  candidates: readonly T[],
  limits: { limit: number; held: ReadonlyMap<string, number>; allowance: (address: string) => number },
): { chosen: T[]; filled: string[] } {
  const held = new Map(limits.held);
  const chosen: T[] = [];
  const filled = new Set<string>();
  for (const row of candidates) {
    const n = held.get(row.endpoint_id) ?? 0;
    if (n >= limits.allowance(row.endpoint_id)) {
      filled.add(row.endpoint_id); // left for a later round, when the worker has room for that address again
      continue;
    }
    held.set(row.endpoint_id, n + 1);
    chosen.push(row);
  }
  return { chosen, filled: candidates.length < limits.limit ? [] : [...filled] };
}

/** The addresses a claim leaves out of its read: those asked for, and those already at their allowance. */
export function addressesLeftOut(held: ReadonlyMap<string, number>, allowance: (address: string) => number, leaveOut?: Iterable<string>): Set<string> {
  const out = new Set(leaveOut);
  for (const [address, n] of held) if (n >= allowance(address)) out.add(address);
  return out;
}

/**
 * The per-address scheduler of one worker. Queued rows wait per address, each in claim order; the
 * addresses are served round-robin (an address moves to the back once served), so none waits behind
 * another's backlog and a slot that frees up looks at the addresses, not at every row held.
 *
 * Claiming ahead: an address whose recent answers came fast may hold more rows than it has slots,
 * so the next POST starts the moment one ends instead of after a claim's round trip. How many
 * follows the address's pace (its slowest recent attempt), so a row claimed ahead expects to wait
 * about a second at most; an address not yet seen gets none ahead.
 */
export function createScheduler<R extends ScheduledRow>(opts: SchedulerOptions) {
  const { concurrency, perAddress, maxWaitMs, resultsPerCommit, now } = opts;
  const aheadWaitMs = Math.min(1000, maxWaitMs / 5);
  /** Rows claimed ahead over all addresses at most. */
  const aheadTotal = maxWaitMs > 0 ? Math.max(AHEAD_PER_ADDRESS_MAX, concurrency * 4) : 0;
  const waiting = new Map<string, R[]>();
  const sendingTo = new Map<string, number>();
  /** Each address's slowest recent attempt (ms), decaying: how many rows it gets ahead. */
  const pace = new Map<string, number>();
  let sending = 0;
  let queued = 0;
  let lastLeaveOutAt = -Infinity;

  return {
    aheadTotal,
    get sending() {
      return sending;
    },
    get queued() {
      return queued;
    },

    /** The most rows of an address held unsent or sending: its cap, plus rows ahead at its pace. */
    allowance(address: string): number {
      const slowMs = pace.get(address);
      if (slowMs === undefined || aheadTotal === 0) return perAddress;
      return perAddress + Math.min(AHEAD_PER_ADDRESS_MAX, Math.floor((perAddress * aheadWaitMs) / Math.max(1, slowMs)));
    },

    /** How many rows the next claim may take, given the rows held in all (`held`, results unwritten included). */
    claimLimit(held: number): number {
      return Math.min(concurrency + aheadTotal - sending - queued, concurrency + aheadTotal + resultsPerCommit - held);
    },

    /** The rows claimed ahead have run low: time to claim again. */
    wantsMore(): boolean {
      return queued <= aheadTotal / 2;
    },

    /**
     * After a claim round: whether to claim again at once (the batch was full while the queue is
     * low, so claims stay large and few), and whether that round leaves the filled addresses out
     * (at most once per LEAVE_OUT_EVERY_MS; `laterInMs` says when the next such round may run).
     */
    afterClaim(claimed: number, limit: number, filled: number): { again: boolean; leaveOut: boolean; laterInMs?: number } {
      const again = claimed === limit && queued <= aheadTotal / 2;
      if (filled === 0) return { again, leaveOut: false };
      const waitMs = lastLeaveOutAt + LEAVE_OUT_EVERY_MS - now();
      if (waitMs > 0) return { again, leaveOut: false, laterInMs: waitMs };
      lastLeaveOutAt = now();
      return { again: true, leaveOut: true };
    },

    /** A row waits for a slot of its address. */
    enqueue(row: R): void {
      row.state = 'queued';
      row.queuedAt = now();
      queued++;
      const queue = waiting.get(row.address);
      if (queue) queue.push(row);
      else waiting.set(row.address, [row]);
    },

    /** Rows still queued after their first turn found no free slot: from now on their wait counts against their lease. */
    markBlocked(rows: Iterable<R>): void {
      for (const row of rows) if (row.state === 'queued') row.blocked = true;
    },

    /**
     * The rows whose turn has come, each address's in claim order: each to `send` (its slot is taken
     * now) or, when it found no slot at its first turn and has waited longer than its lease allows,
     * to `giveBack`. One that is started at its first turn is sent however long its claim took.
     */
    turns(): Turn<R>[] {
      const turns: Turn<R>[] = [];
      for (const address of [...waiting.keys()]) {
        if (sending >= concurrency) break;
        const queue = waiting.get(address)!;
        while (queue.length > 0 && sending < concurrency && (sendingTo.get(address) ?? 0) < perAddress) {
          const row = queue.shift()!;
          queued--;
          if (row.blocked && now() - row.queuedAt > maxWaitMs) {
            turns.push({ row, action: 'giveBack' });
            continue;
          }
          row.state = 'sending';
          sending++;
          sendingTo.set(address, (sendingTo.get(address) ?? 0) + 1);
          turns.push({ row, action: 'send' });
        }
        waiting.delete(address);
        if (queue.length > 0) waiting.set(address, queue); // to the back of the line
      }
      return turns;
    },

    /** A POST ended after `durationMs`: its slot is free, and the address's pace learns from it. */
    sent(row: R, durationMs: number): void {
      sending--;
      const open = sendingTo.get(row.address)! - 1;
      if (open === 0) sendingTo.delete(row.address);
      else sendingTo.set(row.address, open);
      if (pace.size >= 10_000) pace.clear();
      pace.set(row.address, Math.max(durationMs, (pace.get(row.address) ?? durationMs) * 0.9));
    },

    /** Empties every queue (the worker stops): the rows to give back, in address order. */
    drain(): R[] {
      const rows = [...waiting.values()].flat();
      waiting.clear();
      queued = 0;
      return rows;
    },
  };
}

export type Scheduler<R extends ScheduledRow> = ReturnType<typeof createScheduler<R>>;

/** Rows held per address that are not yet written (what a claim counts against the allowance). */
export function heldPerAddress(rows: Iterable<ScheduledRow>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const row of rows) if (row.state !== 'writing') counts.set(row.address, (counts.get(row.address) ?? 0) + 1);
  return counts;
}
