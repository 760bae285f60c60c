import { AUTO_DISABLE, completedSwitch, shouldAutoDisable, signingSecret, streakAfter } from '../../server/webhooks/address-rules';

const DAY = 24 * 3600_000;
const T = 1_800_000_000_000;

describe('which secret signs an attempt', () => {
  const rolling = { secret_encrypted: 'old', secret_next_encrypted: 'new', secret_switch_at: T };

  test('the current one without a roll', () => {
    expect(signingSecret({ secret_encrypted: 'old', secret_next_encrypted: null, secret_switch_at: null }, T + DAY)).toBe('old');
  });

  test('during a roll, by the signing time: before the switch the old one, at and after it the new one', () => {
    expect(signingSecret(rolling, T - 1)).toBe('old');
    expect(signingSecret(rolling, T)).toBe('new');
    expect(signingSecret(rolling, T + 1)).toBe('new');
  });

  test('a switch that has come drops the old secret; one still ahead changes nothing', () => {
    expect(completedSwitch(rolling, T - 1)).toBeNull();
    expect(completedSwitch(rolling, T)).toEqual({ secret_encrypted: 'new', secret_next_encrypted: null, secret_switch_at: null });
    expect(completedSwitch({ secret_encrypted: 'old', secret_next_encrypted: null, secret_switch_at: null }, T)).toBeNull();
  });
});

describe('automatic disabling', () => {
  const { failingForMs, minFailedDeliveries } = AUTO_DISABLE;

  test('the documented threshold: five days and ten failed deliveries', () => {
    expect(failingForMs).toBe(5 * DAY);
    expect(minFailedDeliveries).toBe(10);
  });

  test('a streak starts at the first failure, grows with failures, and any success resets it', () => {
    let s = streakAfter({ failingSince: null, failedDeliveries: 0 }, { delivered: 0, failed: 2 }, T);
    expect(s).toEqual({ failingSince: T, failedDeliveries: 2 });
    s = streakAfter(s, { delivered: 0, failed: 1 }, T + DAY);
    expect(s).toEqual({ failingSince: T, failedDeliveries: 3 });
    expect(streakAfter(s, { delivered: 0, failed: 0 }, T + 2 * DAY)).toBe(s);
    expect(streakAfter(s, { delivered: 1, failed: 4 }, T + 2 * DAY)).toEqual({ failingSince: null, failedDeliveries: 0 });
  });

  test('disabled only when both the time and the count are reached', () => {
    const streak = { failingSince: T, failedDeliveries: minFailedDeliveries };
    expect(shouldAutoDisable(streak, T + failingForMs - 1)).toBe(false);
    expect(shouldAutoDisable(streak, T + failingForMs)).toBe(true);
    expect(shouldAutoDisable({ ...streak, failedDeliveries: minFailedDeliveries - 1 }, T + 30 * DAY)).toBe(false);
    expect(shouldAutoDisable({ failingSince: null, failedDeliveries: 100 }, T + 30 * DAY)).toBe(false);
  });
});
