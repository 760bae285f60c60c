/** The counting rule of live streams (window/stream-leases.ts), for one process and across instances. */
import { admitStream, Lease, streamId } from '../../server/window/stream-leases';

const limits = { perHolder: 2, perClientIp: 3 };
const at = (id: string, until = Infinity): Lease => ({ id, until });

test('under both limits: accepted beside the others', () => {
  expect(admitStream({ holder: [at('a')], clientIp: [at('a'), at('b')], now: 0, ...limits })).toEqual({ accept: true, replace: null });
});

test('a holder at its limit gives up its oldest stream, whichever order the leases come in', () => {
  expect(admitStream({ holder: [at('b'), at('a')], clientIp: [], now: 0, ...limits })).toEqual({ accept: true, replace: 'a' });
});

test("a client address at its limit is refused, unless the holder's replaced stream is one of its", () => {
  expect(admitStream({ holder: [], clientIp: [at('x'), at('y'), at('z')], now: 0, ...limits })).toEqual({ accept: false });
  expect(admitStream({ holder: [at('x'), at('y')], clientIp: [at('x'), at('y'), at('z')], now: 0, ...limits })).toEqual({ accept: true, replace: 'x' });
});

test('lapsed leases (a killed instance stops renewing) count for nothing, and are never the one replaced', () => {
  const now = 1000;
  const holder = [at('a', 999), at('b', 1000), at('c', 1001)];
  expect(admitStream({ holder, clientIp: [at('a', 5), at('b', 5), at('c', 5)], now, ...limits })).toEqual({ accept: true, replace: null });
  expect(admitStream({ holder: [...holder, at('d', 2000)], clientIp: [], now, ...limits })).toEqual({ accept: true, replace: 'c' });
});

test('stream ids sort by start time, then by the order one process opened them', () => {
  const ids = [streamId(10, 'b', 0), streamId(9, 'z', 40), streamId(10, 'b', 11), streamId(10, 'b', 2), streamId(100, 'a', 0)];
  expect([...ids].sort()).toEqual([streamId(9, 'z', 40), streamId(10, 'b', 0), streamId(10, 'b', 2), streamId(10, 'b', 11), streamId(100, 'a', 0)]);
});
