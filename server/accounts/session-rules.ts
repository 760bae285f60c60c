/**
 * The lifetimes of a sign-in session, as pure functions of the session's times and a clock.
 * OWASP's Session Management Cheat Sheet and ASVS 5.0 V7 ask for both an idle and an absolute
 * limit; 30 minutes and 12 hours are the values DECISIONS.md fixes for the dashboard.
 */
export const SESSION_IDLE_MS = 30 * 60_000;
export const SESSION_ABSOLUTE_MS = 12 * 3600_000;
/**
 * A used session's `last_seen_at` is written at most this often, so reads do not become a write
 * each; its idle limit is then counted from the write, up to this much earlier than the use.
 */
export const SESSION_TOUCH_EVERY_MS = 60_000;

export interface SessionTimes {
  createdAt: number;
  lastSeenAt: number;
}

export type SessionState = 'active' | 'idle_expired' | 'expired';

/** When a session begun at `createdAt` and last seen at `lastSeenAt` ends, whichever limit comes first. */
export function sessionExpiry(s: SessionTimes): { idleExpiresAt: number; expiresAt: number; endsAt: number } {
  const expiresAt = s.createdAt + SESSION_ABSOLUTE_MS;
  const idleExpiresAt = Math.min(s.lastSeenAt + SESSION_IDLE_MS, expiresAt);
  return { idleExpiresAt, expiresAt, endsAt: Math.min(idleExpiresAt, expiresAt) };
}

/** Whether the session may be used at `now`; an expired one never comes back, whatever is written later. */
export function sessionState(s: SessionTimes, now: number): SessionState {
  const { idleExpiresAt, expiresAt } = sessionExpiry(s);
  if (now >= expiresAt) return 'expired';
  if (now >= idleExpiresAt) return 'idle_expired';
  return 'active';
}

/** Whether a use at `now` should write the session's `last_seen_at` (and move its idle limit). */
export function shouldTouch(s: SessionTimes, now: number): boolean {
  return now - s.lastSeenAt >= SESSION_TOUCH_EVERY_MS;
}

/** Seconds the cookie should live: until the absolute limit (the idle one is enforced by the server). */
export function cookieMaxAgeSeconds(s: SessionTimes, now: number): number {
  return Math.max(0, Math.floor((s.createdAt + SESSION_ABSOLUTE_MS - now) / 1000));
}

/**
 * After proving the password (at sign-in, or again on `POST /session/sudo`) a session may, for this
 * long, do what turns a stolen session into lasting access: mint tokens, change the password, make
 * owners, show or rotate secrets. GitHub's "sudo mode" keeps a comparable window.
 */
export const SUDO_WINDOW_MS = 10 * 60_000;

/** Until when a session begun at `createdAt`, last re-authenticated at `reauthenticatedAt`, is in its sudo window. */
export function sudoUntil(s: { createdAt: number; reauthenticatedAt: number | null }): number {
  return Math.max(s.createdAt, s.reauthenticatedAt ?? 0) + SUDO_WINDOW_MS;
}
