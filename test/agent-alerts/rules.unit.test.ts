import { ALERT_PERIOD_MS, firstCheckAt, startedRecipients, waitingCheck, type MemberAlertState } from '../../server/agent-alerts/rules';
import { checkDecision } from '../../server/agent-alerts/checks';

const MIN = 60_000;
const member = (accountId: string, over: Partial<MemberAlertState> = {}): MemberAlertState => ({
  accountId,
  mode: 'all',
  waitMinutes: 5,
  lastSentAt: null,
  ...over,
});

describe('who hears of a new conversation', () => {
  it('away members who chose every conversation, outside their period', () => {
    const members = [
      member('all'),
      member('assigned', { mode: 'assigned' }),
      member('none', { mode: 'none' }),
      member('online'),
      member('recent', { lastSentAt: 1_000_000 - ALERT_PERIOD_MS + 1 }),
      member('older', { lastSentAt: 1_000_000 - ALERT_PERIOD_MS }),
    ];
    expect(startedRecipients(members, new Set(['online']), 1_000_000)).toEqual(['all', 'older']);
  });
});

describe('the check of a waiting visitor', () => {
  const t0 = 10_000_000;
  it('nobody waits: nothing now, nothing later', () => {
    expect(waitingCheck({ members: [member('a')], online: new Set(), assigneeId: null, waitingSince: null, now: t0 })).toEqual({
      sendTo: [],
      checkAgainAt: null,
    });
  });

  it('sends to those whose wait ran out and looks again at the next one', () => {
    const members = [member('five'), member('ten', { waitMinutes: 10 }), member('mine', { mode: 'assigned' }), member('other', { mode: 'assigned' })];
    const at = (now: number) => waitingCheck({ members, online: new Set(), assigneeId: 'mine', waitingSince: t0, now });
    expect(at(t0 + 4 * MIN)).toEqual({ sendTo: [], checkAgainAt: t0 + 5 * MIN });
    expect(at(t0 + 5 * MIN)).toEqual({ sendTo: ['five', 'mine'], checkAgainAt: t0 + 10 * MIN });
    expect(at(t0 + 10 * MIN)).toEqual({ sendTo: ['five', 'ten', 'mine'], checkAgainAt: null });
  });

  it('one email of a conversation per period, counted in steps of a busy burst', () => {
    // A visitor writes every minute for an hour, never answered; the check runs whenever it is due.
    let lastSentAt: number | null = null;
    let due: number | null = t0 + 5 * MIN;
    let sent = 0;
    for (let minute = 0; minute <= 60; minute++) {
      const now = t0 + minute * MIN;
      if (due === null || now < due) continue;
      const r = waitingCheck({ members: [member('a', { lastSentAt })], online: new Set(), assigneeId: null, waitingSince: t0, now });
      if (r.sendTo.length) {
        sent++;
        lastSentAt = now;
      }
      due = r.checkAgainAt ?? now + ALERT_PERIOD_MS;
    }
    // At 5, 20, 35 and 50 minutes.
    expect(sent).toBe(4);
  });

  it('a member watching the inbox is looked at again after their wait, not emailed', () => {
    const r = waitingCheck({ members: [member('a')], online: new Set(['a']), assigneeId: null, waitingSince: t0, now: t0 + 6 * MIN });
    expect(r).toEqual({ sendTo: [], checkAgainAt: t0 + 11 * MIN });
  });

  it('first check: the shortest wait of the members who want emails', () => {
    expect(firstCheckAt([member('a', { waitMinutes: 9 }), member('b', { waitMinutes: 3, mode: 'none' }), member('c', { waitMinutes: 7 })], t0)).toBe(
      t0 + 7 * MIN,
    );
    expect(firstCheckAt([member('b', { mode: 'none' })], t0)).toBeNull();
  });
});

describe("a check's next state", () => {
  it('ran: due again at its time with a fresh budget, or done; failed: a minute later, then given up', () => {
    expect(checkDecision({ ok: true, checkAgainAt: 500 }, 1, 100)).toEqual({ outcome: 'retry', status: 'pending', nextAttemptAt: 500 });
    expect(checkDecision({ ok: true, checkAgainAt: null }, 1, 100)).toEqual({ outcome: 'delivered', status: 'delivered', nextAttemptAt: 100 });
    expect(checkDecision({ ok: false, error: 'db away' }, 1, 100)).toEqual({ outcome: 'retry', status: 'pending', nextAttemptAt: 100 + MIN });
    expect(checkDecision({ ok: false, error: 'db away' }, 10, 100).status).toBe('failed');
  });
});
