/**
 * Issue 8, delivery: waking workers across processes. With Redis, a publish in one process (one
 * connection) reaches the subscribers of another; Redis dying never breaks a publisher and the
 * subscription comes back by itself. Without Redis, workers use the adaptive poll. Runs against a
 * private redis-server on its own port, never the shared one.
 */
import { spawnSync } from 'node:child_process';
import { createWakeChannel, adaptivePoll, WakeChannel } from '../../server/webhooks/wake';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';

const PASSWORD = 'wake-redis-pw-5d1e0b';

function recordingLogger() {
  const lines: string[] = [];
  const log = (obj: object, msg: string) => void lines.push(JSON.stringify({ ...obj, msg }));
  return { lines, logger: { warn: log, info: log } };
}

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

describe('without Redis', () => {
  test('a publish wakes this process\'s subscribers once per turn; never live', async () => {
    const wake = createWakeChannel({ logger: recordingLogger().logger });
    let woken = 0;
    wake.subscribe(() => woken++);
    wake.publish();
    wake.publish();
    expect(woken).toBe(0); // after the caller's commit path, not inside it
    await waitFor('the wake-up', () => woken === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(woken).toBe(1);
    expect(wake.live()).toBe(false);
    await wake.close();
  });
});

describe('with Redis', () => {
  let port: number;
  let url: string;
  let redis: PrivateRedis | undefined;
  const channels: WakeChannel[] = [];
  const channelName = `chat:events:wake:test:${process.pid}`;
  const open = (logger = recordingLogger().logger) => {
    const c = createWakeChannel({ redisUrl: url, logger, channel: channelName });
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

  test('a publish on one connection reaches the subscriber of another; the publisher\'s own subscriber is woken once', async () => {
    const writer = open();
    const worker = open();
    let writerWoken = 0;
    let workerWoken = 0;
    writer.subscribe(() => writerWoken++);
    worker.subscribe(() => workerWoken++);
    await waitFor('both subscribed', () => writer.live() && worker.live());
    await new Promise((r) => setTimeout(r, 50)); // the catch-up wake-ups of the subscription
    writerWoken = 0;
    workerWoken = 0;

    writer.publish();
    await waitFor('the other connection to be woken', () => workerWoken === 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(workerWoken).toBe(1);
    expect(writerWoken).toBe(1); // directly, not a second time through Redis
  });

  test('a message published by another process wakes the subscriber', async () => {
    const worker = open();
    let woken = 0;
    worker.subscribe(() => woken++);
    await waitFor('subscribed', () => worker.live());
    await new Promise((r) => setTimeout(r, 50));
    woken = 0;
    const cli = spawnSync('redis-cli', ['-p', String(port), '--no-auth-warning', '-a', PASSWORD, 'PUBLISH', channelName, 'another-process'], { encoding: 'utf8' });
    expect(cli.stdout.trim()).not.toBe('0'); // at least one subscriber got it
    await waitFor('the wake-up', () => woken === 1);
  });

  test('Redis killed: publish neither throws nor waits, polling takes over; after a restart wake-ups flow again', async () => {
    const writerLog = recordingLogger();
    const writer = open(writerLog.logger);
    const worker = open();
    let woken = 0;
    worker.subscribe(() => woken++);
    await waitFor('subscribed', () => writer.live() && worker.live());

    await stopPrivateRedis(redis);
    await waitFor('the subscriber to notice', () => !worker.live());
    const started = Date.now();
    for (let i = 0; i < 100; i++) writer.publish();
    expect(Date.now() - started).toBeLessThan(50);
    await new Promise((r) => setTimeout(r, 300)); // any rejection would surface as unhandled here
    expect(writerLog.lines.some((l) => /Redis unavailable/.test(l))).toBe(true);
    expect(writerLog.lines.join('\n')).not.toContain(PASSWORD);

    redis = await startPrivateRedis(port, PASSWORD);
    woken = 0;
    await waitFor('the subscription to come back', () => worker.live() && writer.live(), 15_000);
    await waitFor('the catch-up wake-up after reconnecting', () => woken >= 1);
    woken = 0;
    await waitFor('the publisher to be ready', async () => {
      writer.publish();
      await new Promise((r) => setTimeout(r, 50));
      return woken > 0;
    });
    expect(writerLog.lines.some((l) => /ready again/.test(l))).toBe(true);
  });

  test('an unreachable Redis at start: creating, publishing and closing all succeed at once', async () => {
    const nowhere = `redis://:${PASSWORD}@127.0.0.1:${await freePort()}`;
    const log = recordingLogger();
    const wake = createWakeChannel({ redisUrl: nowhere, logger: log.logger, channel: channelName });
    let woken = 0;
    wake.subscribe(() => woken++);
    wake.publish();
    await waitFor('the local wake-up', () => woken === 1);
    expect(wake.live()).toBe(false);
    const started = Date.now();
    await wake.close();
    expect(Date.now() - started).toBeLessThan(500);
  });
});
