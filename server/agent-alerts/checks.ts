import { createJobWorker, type DeliveryProvider, type DeliveryWorker, type JobWorkerOptions } from '../delivery/engine';
import type { RetryDecision } from '../delivery/retry-schedule';
import type { AgentAlerts } from './service';
import type { AlertStore, CheckClaim } from './store';

/** One check's result: when to look again (null: done), or why it could not run (the database was away). */
type CheckResult = { ok: true; checkAgainAt: number | null } | { ok: false; error: string };

/** A check that could not run is tried again a minute later, at most this many times in a row. */
const FAILED_RETRY_MS = 60_000;
const MAX_FAILED = 10;

/** The decision of a check's result, free of I/O: due again at its time, ended, or retried after a failure. */
export function checkDecision(result: CheckResult, roundAttempt: number, now: number): RetryDecision {
  if (result.ok) {
    return result.checkAgainAt === null
      ? { outcome: 'delivered', status: 'delivered', nextAttemptAt: now }
      : { outcome: 'retry', status: 'pending', nextAttemptAt: Math.max(now, result.checkAgainAt) };
  }
  if (roundAttempt >= MAX_FAILED) return { outcome: 'failed', status: 'failed', nextAttemptAt: now };
  return { outcome: 'retry', status: 'pending', nextAttemptAt: now + FAILED_RETRY_MS };
}

/**
 * The scheduled checks of waiting conversations, on the delivery engine: claims with a lease
 * (skipping each other's rows on MySQL, so instances never run one check at once), fenced results,
 * a clean stop. A check that ran starts a fresh attempt budget; a late repeat of one (a worker that
 * died after its commit) sends nothing, since each member's 15-minute period was marked with the email.
 */
export function createAlertCheckWorker(opts: JobWorkerOptions & { store: AlertStore; alerts: Pick<AgentAlerts, 'check'> }): DeliveryWorker {
  const provider: DeliveryProvider<CheckClaim, CheckResult, { ran: boolean }> = {
    label: 'waiting-visitor check',
    kinds: [],
    schedule: { maxAttempts: MAX_FAILED, decide: checkDecision },
    claimDue: (req) => opts.store.claimDue(req),
    finishAttempts: (owner, outcomes) => opts.store.finishAttempts(owner, outcomes),
    logInterrupted: async () => {},
    unsentReason: () => null,
    async send({ check }) {
      let result: CheckResult;
      try {
        result = { ok: true, checkAgainAt: await opts.alerts.check(check.site_id, check.conversation_id) };
      } catch (err) {
        result = { ok: false, error: String((err as Error).message).slice(0, 300) };
      }
      return {
        result,
        row: () => ({ ran: result.ok }),
        summary: { conversationId: check.conversation_id, ...(result.ok ? { checkAgainAt: result.checkAgainAt } : { error: result.error }) },
      };
    },
  };
  return createJobWorker(provider, opts);
}
