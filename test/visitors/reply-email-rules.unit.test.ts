import { decideReplyEmail, noticeDueAt, REPLY_EMAIL_DELAY_MS, replyEmailState, subscribed, unseenReplies } from '../../server/visitors/reply-email-rules';

const v = (email: string | null, replyEmailAt: number | null, replyEmailUnsubscribedAt: number | null) => ({ email, replyEmailAt, replyEmailUnsubscribedAt });

describe('replies by email: the rules', () => {
  test('a notice comes due the delay after the reply', () => {
    expect(noticeDueAt(1_000)).toBe(1_000 + REPLY_EMAIL_DELAY_MS);
    expect(noticeDueAt(1_000, 5)).toBe(1_005);
  });

  test('only a visitor who left an email for replies and did not unsubscribe is emailed', () => {
    expect(subscribed(undefined)).toBe(false);
    expect(subscribed(v('a@example.test', null, null))).toBe(false); // an email the page passed: no consent
    expect(subscribed(v(null, 1, null))).toBe(false);
    expect(subscribed(v('a@example.test', 1, 2))).toBe(false);
    expect(subscribed(v('a@example.test', 1, null))).toBe(true);
    expect([v('a@example.test', null, null), v('a@example.test', 1, null), v('a@example.test', 1, 2)].map(replyEmailState)).toEqual([
      'none',
      'subscribed',
      'unsubscribed',
    ]);
  });

  test('unseen replies: agent replies after the seen mark, by time then id', () => {
    const newestFirst = [
      { id: 'msg_4', createdAt: 20, direction: 'outgoing' },
      { id: 'msg_3', createdAt: 10, direction: 'outgoing' },
      { id: 'msg_2', createdAt: 10, direction: 'incoming' },
      { id: 'msg_1', createdAt: 5, direction: 'outgoing' },
    ];
    expect(unseenReplies(newestFirst, undefined).map((m) => m.id)).toEqual(['msg_4', 'msg_3', 'msg_1']);
    expect(unseenReplies(newestFirst, { createdAt: 10, id: 'msg_2' }).map((m) => m.id)).toEqual(['msg_4', 'msg_3']);
    expect(unseenReplies(newestFirst, { createdAt: 20, id: 'msg_4' })).toEqual([]);
  });

  test('a due notice sends when there is something unseen for a subscribed visitor, and says why not otherwise', () => {
    expect(decideReplyEmail({ visitor: v('a@example.test', 1, null), unseen: 2 })).toEqual({ send: true });
    expect(decideReplyEmail({ visitor: v('a@example.test', 1, null), unseen: 0 })).toEqual({
      send: false,
      reason: 'not sent: the visitor saw the replies in the window',
    });
    expect(decideReplyEmail({ visitor: v('a@example.test', 1, 3), unseen: 2 })).toMatchObject({ send: false });
  });
});
