/** The pure rules of typing and "seen" (server/window/live-rules.ts), on a fake clock. */
import { createTypingThrottle, seenMovesForward, TYPING_EXPIRES_MS, TYPING_THROTTLE_MS } from '../../server/window/live-rules';

describe('the typing throttle', () => {
  test('one start a throttle period while typing goes on, a stop only after a start that has not expired', () => {
    let t = 0;
    const th = createTypingThrottle(() => t);
    expect(th.pass('a', false)).toBe(false); // nothing shown: nothing to stop
    expect(th.pass('a', true)).toBe(true);
    t += 100;
    expect(th.pass('a', true)).toBe(false); // keystrokes within 2 s
    t += TYPING_THROTTLE_MS;
    expect(th.pass('a', true)).toBe(true); // a renewal
    expect(th.pass('a', false)).toBe(true);
    expect(th.pass('a', false)).toBe(false); // stopped already
    expect(th.pass('a', true)).toBe(false); // a start again within 2 s of the last one waits
    t += TYPING_THROTTLE_MS;
    expect(th.pass('a', true)).toBe(true);
    t += TYPING_EXPIRES_MS;
    expect(th.pass('a', false)).toBe(false); // expired by itself on the other side
    expect(th.pass('b', true)).toBe(true); // keys are apart
  });

  test('a client flipping start and stop on every keystroke costs at most two events a throttle period', () => {
    let t = 0;
    const th = createTypingThrottle(() => t);
    let passed = 0;
    for (let i = 0; i < 1000; i++) {
      t += 2; // 2 seconds of reports in all
      if (th.pass('flood', i % 2 === 0)) passed++;
    }
    expect(passed).toBeLessThanOrEqual(2 * Math.ceil(2000 / TYPING_THROTTLE_MS) + 2);
  });

  test('remembers a bounded number of typists, forgetting the expired and then the oldest', () => {
    let t = 0;
    const th = createTypingThrottle(() => t, { maxKeys: 100 });
    for (let i = 0; i < 1000; i++) th.pass(`k${i}`, true);
    expect(th.size()).toBeLessThanOrEqual(101);
    t += TYPING_EXPIRES_MS;
    th.pass('late', true);
    expect(th.size()).toBe(1);
  });
});

describe('seen moves forward only', () => {
  test('by time, then id; a repeat or an older reply does not move it', () => {
    expect(seenMovesForward(undefined, { createdAt: 1, id: 'msg_a' })).toBe(true);
    expect(seenMovesForward({ createdAt: 5, id: 'msg_b' }, { createdAt: 6, id: 'msg_a' })).toBe(true);
    expect(seenMovesForward({ createdAt: 5, id: 'msg_b' }, { createdAt: 5, id: 'msg_c' })).toBe(true);
    expect(seenMovesForward({ createdAt: 5, id: 'msg_b' }, { createdAt: 5, id: 'msg_b' })).toBe(false);
    expect(seenMovesForward({ createdAt: 5, id: 'msg_b' }, { createdAt: 4, id: 'msg_z' })).toBe(false);
  });
});
