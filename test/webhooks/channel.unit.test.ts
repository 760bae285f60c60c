/**
 * The event channel's pure parts, without Redis or a database: the Redis message format, the
 * in-process channel (one batch a turn, listeners isolated from each other) and the workers'
 * adaptive poll.
 */
import {
  adaptivePoll,
  ChannelMessage,
  CommittedEvent,
  createEventChannel,
  decodeNotice,
  DELIVERY_KINDS,
  encodeNotice,
  InboxNotice,
  LiveSignal,
} from '../../server/delivery/channel';

const event = (n: number, visitorId = `vis_${n}`): CommittedEvent => ({
  kind: 'event',
  id: `message.created:${n}`,
  siteId: 'ws_a',
  visitorId,
  createdAt: 1_800_000_000_000 + n,
});
const nextTurn = () => new Promise((r) => setImmediate(r));

describe('the Redis message', () => {
  test("carries the sender and each event's id, site, visitor and time, nothing else", () => {
    const events = [event(1), { ...event(2), extra: 'not sent' } as CommittedEvent];
    const message = encodeNotice('origin123', events);
    expect(message.startsWith('origin123 ')).toBe(true);
    expect(message).not.toContain('not sent');
    expect(decodeNotice(message)).toEqual({ from: 'origin123', messages: [event(1), event(2)] });
  });

  test('too many events to list: only the sender, which tells the others to look', () => {
    const many = Array.from({ length: 501 }, (_, i) => event(i));
    expect(encodeNotice('o', many)).toBe('o');
    expect(encodeNotice('o', many.slice(0, 500))).not.toBe('o');
  });

  test('an older release\'s wake-up (its id alone) and unreadable lists say "look yourself"', () => {
    expect(decodeNotice('another-process')).toEqual({ from: 'another-process', messages: null });
    expect(decodeNotice('o {not json')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o {"id":"x"}')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o [{"id":"x","siteId":"s","visitorId":"v"}]')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o [{"id":"x","siteId":"s","visitorId":7,"createdAt":1}]')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o [null]')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o []')).toEqual({ from: 'o', messages: [] });
  });
});

describe('the in-process channel', () => {
  test("publishes of one turn reach each listener once, after the caller's turn, as one batch; never live", async () => {
    const channel = createEventChannel();
    const heard: (readonly CommittedEvent[] | null)[] = [];
    channel.subscribe((events) => heard.push(events), ['event']);
    channel.publish([event(1)]);
    channel.publish([event(2), event(3)]);
    channel.publish([]);
    expect(heard).toEqual([]); // not inside the writer's own turn
    await nextTurn();
    expect(heard).toEqual([[event(1), event(2), event(3)]]);
    channel.publish([event(4)]);
    await nextTurn();
    expect(heard).toEqual([[event(1), event(2), event(3)], [event(4)]]);
    channel.publish([]);
    await nextTurn();
    expect(heard).toHaveLength(2); // nothing published, nothing told
    expect(channel.live()).toBe(false);
    await channel.close();
  });

  test('a throwing listener does not keep the others from hearing; unsubscribed listeners hear nothing more', async () => {
    const channel = createEventChannel();
    let good = 0;
    let gone = 0;
    channel.subscribe(() => {
      throw new Error('listener failed');
    });
    channel.subscribe(() => good++);
    const off = channel.subscribe(() => gone++);
    channel.publish([event(1)]);
    await nextTurn();
    expect([good, gone]).toEqual([1, 1]);
    off();
    channel.publish([event(2)]);
    await nextTurn();
    expect([good, gone]).toEqual([2, 1]);
  });
});

const notice = (position: number): InboxNotice => ({ kind: 'inbox', siteId: 'ws_a', visitorId: 'vis_1', position, createdAt: 1_800_000_000_000 });
const typing = (typingNow: boolean): LiveSignal => ({
  kind: 'signal',
  siteId: 'ws_a',
  visitorId: 'vis_1',
  conversationId: 'conv_1',
  to: 'members',
  event: 'conversation.typing',
  data: { conversationId: 'conv_1', from: 'visitor', accountId: null, typing: typingNow },
});

describe('messages with a kind', () => {
  test('each kind crosses Redis with its own fields; an item of a newer kind is skipped, a malformed one makes the message "look yourself"', () => {
    const all: ChannelMessage[] = [event(1), notice(7), typing(true)];
    expect(decodeNotice(encodeNotice('o', all))).toEqual({ from: 'o', messages: all });
    // An older release's item (no kind) is an outbox event.
    expect(decodeNotice('o [{"id":"x","siteId":"s","visitorId":"v","createdAt":1}]')).toEqual({
      from: 'o',
      messages: [{ kind: 'event', id: 'x', siteId: 's', visitorId: 'v', createdAt: 1 }],
    });
    expect(decodeNotice('o [{"kind":"later","siteId":"s","visitorId":"v"}]')).toEqual({ from: 'o', messages: [] });
    expect(decodeNotice('o [{"kind":"inbox","siteId":"s","visitorId":"v","position":"7","createdAt":1}]')).toEqual({ from: 'o', messages: null });
    expect(decodeNotice('o [{"kind":"signal","siteId":"s","visitorId":"v","conversationId":"c","to":"all","event":"e","data":{}}]')).toEqual({
      from: 'o',
      messages: null,
    });
  });

  test('a delivery worker is woken by outbox events only: never by an inbox row or a typing signal (counted)', async () => {
    const channel = createEventChannel();
    let workerWakes = 0;
    const signals: ChannelMessage[] = [];
    const inboxHeard: (readonly ChannelMessage[] | null)[] = [];
    channel.subscribe(() => workerWakes++, DELIVERY_KINDS);
    channel.subscribe((m) => m && signals.push(...m), ['signal']);
    channel.subscribe((m) => inboxHeard.push(m), ['event', 'inbox', 'signal']);
    for (let i = 0; i < 50; i++) channel.publish([typing(i % 2 === 0)]);
    channel.publish([notice(1)]);
    await nextTurn();
    expect(workerWakes).toBe(0);
    expect(signals).toHaveLength(50);
    expect(inboxHeard).toEqual([[...Array.from({ length: 50 }, (_, i) => typing(i % 2 === 0)), notice(1)]]);
    channel.publish([typing(true), event(9)]);
    await nextTurn();
    expect(workerWakes).toBe(1);
    expect(signals).toHaveLength(51);
    await channel.close();
  });
});

describe('adaptive poll', () => {
  test('short while work keeps coming, then doubling up to the maximum', () => {
    let t = 0;
    const poll = adaptivePoll({ minMs: 50, maxMs: 1000, activeMs: 1000, now: () => t });
    expect(poll.nextDelay(false)).toBe(1000); // idle from the start
    expect(poll.nextDelay(true)).toBe(50);
    t += 50;
    expect(poll.nextDelay(false)).toBe(50); // recent activity: keep looking briskly
    t += 960;
    expect(poll.nextDelay(false)).toBe(100);
    expect(poll.nextDelay(false)).toBe(200);
    expect(poll.nextDelay(false)).toBe(400);
    expect(poll.nextDelay(false)).toBe(800);
    expect(poll.nextDelay(false)).toBe(1000);
    expect(poll.nextDelay(false)).toBe(1000);
    expect(poll.nextDelay(true)).toBe(50);
  });
});
