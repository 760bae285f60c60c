/**
 * The event channel across processes: with Redis, the events a publish in one process (one
 * connection) names reach the listeners of another; Redis dying never breaks a publisher, the
 * subscription comes back by itself and tells its listeners to look. Runs against a private
 * redis-server on its own port, never the shared one. The pure parts: channel.unit.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { CommittedEvent, createEventChannel, EventChannel } from '../../server/delivery/channel';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';

const PASSWORD = 'wake-redis-pw-5d1e0b';

function recordingLogger() {
  const lines: string[] = [];
  const log = (obj: object, msg: string) => void lines.push(JSON.stringify({ ...obj, msg }));
  return { lines, logger: { warn: log, info: log } };
}

const event = (n: number): CommittedEvent => ({
  kind: 'event',
  id: `message.created:t${n}`,
  siteId: 'ws_x',
  visitorId: `vis_${n}`,
  createdAt: 1_800_000_000_000 + n,
});

describe('with Redis', () => {
  let port: number;
  let url: string;
  let redis: PrivateRedis | undefined;
  const channels: EventChannel[] = [];
  const channelName = `chat:events:test:${process.pid}`;
  const open = (logger = recordingLogger().logger) => {
    const c = createEventChannel({ redisUrl: url, logger, channel: channelName });
    channels.push(c);
    return c;
  };

  beforeAll(async () => {
    port = await freePort();
    url = `redis://:${PASSWORD}@127.0.0.1:${port}`;
    redis = await startPrivateRedis(port, PASSWORD);
  });
  afterAll(async () => {
    await Promise.all(channels.map((c) => c.close()));
    await stopPrivateRedis(redis);
  });

  test("a publish on one connection reaches the listener of another with its events; the publisher's own listener is told once", async () => {
    const writer = open();
    const worker = open();
    const writerHeard: (readonly CommittedEvent[] | null)[] = [];
    const workerHeard: (readonly CommittedEvent[] | null)[] = [];
    writer.subscribe((events) => writerHeard.push(events), ['event']);
    worker.subscribe((events) => workerHeard.push(events), ['event']);
    await waitFor('both subscribed', () => writer.live() && worker.live());
    await new Promise((r) => setTimeout(r, 50)); // the catch-up notices of the subscription
    expect(workerHeard).toEqual([null]);
    writerHeard.length = 0;
    workerHeard.length = 0;

    writer.publish([event(1)]);
    writer.publish([event(2)]);
    await waitFor('the other connection to hear', () => workerHeard.length === 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(workerHeard).toEqual([[event(1), event(2)]]); // one message for the turn
    expect(writerHeard).toEqual([[event(1), event(2)]]); // directly, not a second time through Redis
  });

  test('a message of an older release (its id alone) tells the listener to look', async () => {
    const worker = open();
    const heard: (readonly CommittedEvent[] | null)[] = [];
    worker.subscribe((events) => heard.push(events), ['event']);
    await waitFor('subscribed', () => worker.live());
    await new Promise((r) => setTimeout(r, 50));
    heard.length = 0;
    const cli = spawnSync('redis-cli', ['-p', String(port), '--no-auth-warning', '-a', PASSWORD, 'PUBLISH', channelName, 'another-process'], {
      encoding: 'utf8',
    });
    expect(cli.stdout.trim()).not.toBe('0'); // at least one subscriber got it
    await waitFor('the notice', () => heard.length === 1);
    expect(heard).toEqual([null]);
  });

  test('a channel closed right after its first publish (a CLI command) still sends it once connected', async () => {
    const worker = open();
    const heard: (readonly CommittedEvent[] | null)[] = [];
    worker.subscribe((events) => events && heard.push(events), ['event']);
    await waitFor('subscribed', () => worker.live());
    const cli = createEventChannel({ redisUrl: url, channel: channelName });
    cli.publish([event(7)]);
    await cli.close();
    await waitFor("the CLI's events", () => heard.length === 1, 2000);
    expect(heard).toEqual([[event(7)]]);
  });

  test('Redis killed: publish neither throws nor waits, polling takes over; after a restart wake-ups flow again', async () => {
    const writerLog = recordingLogger();
    const writer = open(writerLog.logger);
    const worker = open();
    let woken = 0;
    worker.subscribe(() => woken++);
    const toldHere: (readonly CommittedEvent[] | null)[] = [];
    writer.subscribe((events) => toldHere.push(events), ['event']);
    await waitFor('subscribed', () => writer.live() && worker.live());

    await stopPrivateRedis(redis);
    await waitFor('the subscriber to notice', () => !worker.live());
    toldHere.length = 0;
    // Never waits: publish gives nothing to wait on, and this process's listeners are told on the very
    // next turn of the event loop, Redis or not (a publish that waited for Redis would tell them later).
    const hundred = Array.from({ length: 100 }, (_, i) => event(i));
    const returned = hundred.map((e) => writer.publish([e]));
    expect(returned.every((r) => r === undefined)).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(toldHere).toEqual([hundred]); // one batch for the turn
    await new Promise((r) => setTimeout(r, 300)); // any rejection would surface as unhandled here
    expect(writerLog.lines.some((l) => /Redis unavailable/.test(l))).toBe(true);
    expect(writerLog.lines.join('\n')).not.toContain(PASSWORD);

    redis = await startPrivateRedis(port, PASSWORD);
    woken = 0;
    await waitFor('the subscription to come back', () => worker.live() && writer.live(), 15_000);
    await waitFor('the catch-up wake-up after reconnecting', () => woken >= 1);
    woken = 0;
    await waitFor('the publisher to be ready', async () => {
      writer.publish([event(0)]);
      await new Promise((r) => setTimeout(r, 50));
      return woken > 0;
    });
    expect(writerLog.lines.some((l) => /ready again/.test(l))).toBe(true);
  });

  test('an unreachable Redis at start: creating, publishing and closing all succeed at once', async () => {
    const nowhere = `redis://:${PASSWORD}@127.0.0.1:${await freePort()}`;
    const log = recordingLogger();
    const wake = createEventChannel({ redisUrl: nowhere, logger: log.logger, channel: channelName });
    let woken = 0;
    wake.subscribe(() => woken++);
    wake.publish([event(1)]);
    await waitFor('the local notice', () => woken === 1);
    expect(wake.live()).toBe(false);
    // Close waits for nothing but its own flush timer (CLOSE_FLUSH_MS, 300 ms, for a first connection
    // still under way). It races a 1,000 ms timer started with it: expired timers run in the order
    // they fall due however busy the machine is, so only a close that waits for something else (the
    // connection that never comes, ioredis' 2 s disconnect time-out) loses the race.
    let closed = false;
    const closing = wake.close().then(() => void (closed = true));
    const lostTheRace = await new Promise<boolean>((resolve) => setTimeout(() => resolve(!closed), 1000));
    await closing;
    expect(lostTheRace).toBe(false);
  });
});
