/**
 * The pure rules of an event address's state: which secret signs an attempt during a planned roll,
 * and when persistent failure disables the address. Clocks are passed in; no database here.
 */

const HOUR = 3600_000;
const DAY = 24 * HOUR;

/** A planned roll switches this long after it starts unless the owner says otherwise. */
export const DEFAULT_SWITCH_IN_HOURS = 24;
/** The longest a planned roll may wait before it switches (a week: longer overlaps only keep a secret alive). */
export const MAX_SWITCH_IN_HOURS = 7 * 24;

/**
 * How far ahead of "now" a switch the owner asks for takes effect. A worker signs an attempt with
 * the address as it read it when it claimed the row; the worker gives back unsent any claim older
 * than this (worker.ts), so every instance has read the new switch time before it is reached, and
 * no attempt is signed with the old secret after the switch time the owner was answered.
 */
export const SWITCH_SETTLE_MS = 10_000;

/** The secret fields of an address as stored (sealed: AES-256-GCM). */
export interface SecretState {
  secret_encrypted: string;
  secret_next_encrypted: string | null;
  secret_switch_at: number | null;
}

/**
 * The sealed secret that signs an attempt signed at `signedAt`: the next secret once the switch
 * time has come (at or after it), the current one before. Signing time, not the event's creation
 * or the claim's time, decides, so every retry after the switch carries the new signature.
 */
export function signingSecret(address: SecretState, signedAt: number): string {
  if (address.secret_next_encrypted !== null && address.secret_switch_at !== null && signedAt >= address.secret_switch_at) return address.secret_next_encrypted;
  return address.secret_encrypted;
}

/** The secrets after a switch that has come: the next one becomes current and the old one is dropped; null while it has not. */
export function completedSwitch(address: SecretState, now: number): SecretState | null {
  if (address.secret_next_encrypted === null || address.secret_switch_at === null || now < address.secret_switch_at) return null;
  return { secret_encrypted: address.secret_next_encrypted, secret_next_encrypted: null, secret_switch_at: null };
}

/**
 * Automatic disabling: an address whose deliveries have failed for AUTO_DISABLE.failingForMs
 * without a single success in between, with at least AUTO_DISABLE.minFailedDeliveries failed
 * deliveries in that run, is disabled. Svix disables an endpoint after five days of failing
 * deliveries; Stripe warns after days of failures and disables the endpoint. A failed delivery
 * is one whose every retry failed (hours of attempts) or that a receiver refused (4xx), so ten of
 * them over five days is a receiver that is gone or broken, not a slow afternoon; the count keeps a
 * quiet site (one stray failure days ago, one today) from being switched off on two events.
 */
export const AUTO_DISABLE = { failingForMs: 5 * DAY, minFailedDeliveries: 10 } as const;

/** Failed deliveries since the last success (`failingSince` null: none). */
export interface FailureStreak {
  failingSince: number | null;
  failedDeliveries: number;
}

/** The streak after deliveries ended at `now`: any success resets it, failures lengthen it. */
export function streakAfter(streak: FailureStreak, ended: { delivered: number; failed: number }, now: number): FailureStreak {
  if (ended.delivered > 0) return { failingSince: null, failedDeliveries: 0 };
  if (ended.failed === 0) return streak;
  return { failingSince: streak.failingSince ?? now, failedDeliveries: streak.failedDeliveries + ended.failed };
}

/** Whether the streak disables the address at `now`. */
export function shouldAutoDisable(streak: FailureStreak, now: number): boolean {
  return streak.failingSince !== null && now - streak.failingSince >= AUTO_DISABLE.failingForMs && streak.failedDeliveries >= AUTO_DISABLE.minFailedDeliveries;
}
