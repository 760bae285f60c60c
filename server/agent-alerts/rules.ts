/**
 * Who among a site's members is emailed of a waiting visitor, and when: pure, with the clock passed
 * in (docs/email.md, "Agents told of waiting visitors").
 */

/** A member's choice per site: every new or waiting conversation, only those assigned to them, or none. */
export type AlertMode = 'all' | 'assigned' | 'none';
export const ALERT_MODES: readonly AlertMode[] = ['all', 'assigned', 'none'];

/** DECISIONS.md: every member hears of new conversations until they choose otherwise; a visitor waits 5 minutes. */
export const DEFAULT_MODE: AlertMode = 'all';
export const DEFAULT_WAIT_MINUTES = 5;
/** At most one email of one conversation to one member in this period. */
export const ALERT_PERIOD_MS = 15 * 60_000;

export interface MemberAlertState {
  accountId: string;
  mode: AlertMode;
  waitMinutes: number;
  /** When this member was last emailed of this conversation, if ever. */
  lastSentAt: number | null;
}

/** Whether the member would hear of this conversation at all (its setting and its assignee). */
export function wantsConversation(mode: AlertMode, accountId: string, assigneeId: string | null): boolean {
  if (mode === 'none') return false;
  return mode === 'all' || assigneeId === accountId;
}

/** When the period since the member's last email of the conversation lets another one go. */
export const nextAllowedAt = (lastSentAt: number | null) => (lastSentAt === null ? -Infinity : lastSentAt + ALERT_PERIOD_MS);

/**
 * A visitor started a conversation: the members emailed now. Those with a live inbox stream see it
 * there; a new conversation has no assignee, so only `all` members hear of it.
 */
export function startedRecipients(members: readonly MemberAlertState[], online: ReadonlySet<string>, now: number): string[] {
  return members
    .filter((m) => !online.has(m.accountId) && wantsConversation(m.mode, m.accountId, null) && nextAllowedAt(m.lastSentAt) <= now)
    .map((m) => m.accountId);
}

/**
 * The scheduled check of a conversation whose visitor has waited since `waitingSince` (null: the
 * last message is a member's, nobody waits). Answers the members to email now and when to look
 * again: the earliest moment another member's wait or period runs out, or null when none will.
 * A member online now is looked at again at their next moment too: they may close the dashboard.
 */
export function waitingCheck(input: {
  members: readonly MemberAlertState[];
  online: ReadonlySet<string>;
  assigneeId: string | null;
  waitingSince: number | null;
  now: number;
}): { sendTo: string[]; checkAgainAt: number | null } {
  const { members, online, assigneeId, waitingSince, now } = input;
  if (waitingSince === null) return { sendTo: [], checkAgainAt: null };
  const sendTo: string[] = [];
  let checkAgainAt: number | null = null;
  const later = (at: number) => (checkAgainAt = checkAgainAt === null ? at : Math.min(checkAgainAt, at));
  for (const m of members) {
    if (!wantsConversation(m.mode, m.accountId, assigneeId)) continue;
    const due = Math.max(waitingSince + m.waitMinutes * 60_000, nextAllowedAt(m.lastSentAt));
    if (due > now) later(due);
    else if (online.has(m.accountId)) later(now + m.waitMinutes * 60_000);
    else sendTo.push(m.accountId);
  }
  return { sendTo, checkAgainAt };
}

/** When a new visitor message makes the conversation's check due: the shortest wait of its members. */
export function firstCheckAt(members: readonly Pick<MemberAlertState, 'mode' | 'waitMinutes'>[], at: number): number | null {
  const waits = members.filter((m) => m.mode !== 'none').map((m) => m.waitMinutes);
  return waits.length ? at + Math.min(...waits) * 60_000 : null;
}
