/**
 * The timeline page's grouping (server/dashboard/browser/timeline/group.ts): messages hold the events
 * they emitted, events their attempts, and entries of a kind the page does not know (a later API
 * version's) stay in the list where they came instead of breaking it or vanishing.
 */
import { groupTimeline, type AnyEntry } from '../../server/dashboard/browser/timeline/group';

const at = (s: number) => new Date(Date.UTC(2026, 10, 26, 7, 0, s)).toISOString();
const author = { type: 'visitor', apiKeyId: null, apiKeyLabel: null, accountId: null };
const message = (id: string, s: number): AnyEntry => ({
  type: 'message',
  at: at(s),
  messageId: id,
  direction: 'incoming',
  origin: 'widget',
  format: 'plain',
  author,
});
const event = (id: string, messageId: string | null, s: number): AnyEntry => ({
  type: 'event',
  at: at(s),
  eventId: id,
  event: id.split(':')[0],
  messageId,
  delivery: 'failed',
});
const attempt = (eventId: string, n: number, s: number): AnyEntry => ({
  type: 'attempt',
  at: at(s),
  eventId,
  attempt: n,
  outcome: 'failed',
  status: 500,
  error: null,
  durationMs: 5,
});

test('messages hold their events, events their attempts (also attempts that came after the next message)', () => {
  const nodes = groupTimeline([
    message('msg_1', 0),
    event('message.created:1', 'msg_1', 0),
    attempt('message.created:1', 1, 1),
    message('msg_2', 2),
    event('message.created:2', 'msg_2', 2),
    attempt('message.created:1', 2, 6),
    event('conversation.closed:3', null, 7),
  ]);
  expect(nodes.map((n) => n.kind)).toEqual(['message', 'message', 'event']);
  const [first, second, closed] = nodes;
  if (first.kind !== 'message' || second.kind !== 'message' || closed.kind !== 'event') throw new Error('kinds');
  expect(first.events.map((e) => [e.event.eventId, e.attempts.map((a) => a.attempt)])).toEqual([['message.created:1', [1, 2]]]);
  expect(second.events.map((e) => e.attempts.length)).toEqual([0]);
  expect(closed.node.event.eventId).toBe('conversation.closed:3');
});

test('an unknown kind, and an attempt of an event not on the page, stay in the list where they came', () => {
  const replay: AnyEntry = { type: 'idempotent_replay', at: at(3), messageId: 'msg_1', idempotencyKey: 'k-1' };
  const nodes = groupTimeline([message('msg_1', 0), replay, attempt('message.created:9', 4, 4), message('msg_2', 5)]);
  expect(nodes.map((n) => n.kind)).toEqual(['message', 'other', 'other', 'message']);
  expect(nodes[1]).toEqual({ kind: 'other', entry: replay });
});

test('an idempotent replay is an entry of its own, where it came, with whose key and the fingerprint', () => {
  const replay: AnyEntry = {
    type: 'replayed',
    at: at(3),
    messageId: 'msg_1',
    status: 201,
    by: { type: 'api_key', apiKeyId: 'key_1', apiKeyLabel: 'CRM', accountId: null },
    idempotencyKeyFingerprint: '0123456789abcdef',
  };
  const nodes = groupTimeline([message('msg_1', 0), event('message.created:1', 'msg_1', 1), replay, message('msg_2', 4)]);
  expect(nodes.map((n) => n.kind)).toEqual(['message', 'replay', 'message']);
  expect(nodes[1]).toEqual({ kind: 'replay', entry: replay });
});
