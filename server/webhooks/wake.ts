import Redis, { RedisOptions } from 'ioredis';
import { randomBase62 } from '../platform/crypto';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../platform/redis';

/**
 * The shared fail-fast settings (server/platform/redis.ts): a writer never waits for Redis. A
 * wake-up lost in an outage costs nothing but latency, because workers keep polling (adaptivePoll below).
 */
export const WAKE_REDIS_OPTIONS: RedisOptions = {
  ...FAIL_FAST_REDIS_OPTIONS,
  // The subscription is renewed by us on every `ready`, together with a catch-up wake-up.
  autoResubscribe: false,
  // How long a close waits for the socket to end before destroying it (ioredis' 2 s holds a
  // stopping worker's exit back when Redis is away).
  disconnectTimeout: 200,
};

export const WAKE_CHANNEL = 'chat:events:wake';

interface WakeLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface WakeChannelOptions {
  /** Unset: wake-ups stay within this process, and other processes rely on polling alone. */
  redisUrl?: string;
  logger: WakeLogger;
  /** Redis channel name (tests use their own). */
  channel?: string;
}

export interface WakeChannel {
  /**
   * New events were committed: wake this process's subscribers at once and, with Redis, the
   * workers of every other process. Call it after the commit. Never throws, never waits; calls in
   * the same turn of the event loop are sent as one message.
   */
  publish(): void;
  /** `onWake` runs whenever events may be waiting (also after Redis comes back, for what was missed meanwhile). */
  subscribe(onWake: () => void): void;
  /** Whether wake-ups from other processes arrive now; while false, poll briskly. */
  live(): boolean;
  close(): Promise<void>;
}

/**
 * Wakes delivery workers across processes: Redis pub/sub when REDIS_URL is set. Redis going away
 * never breaks a writer or a worker: publishing is skipped while the connection is not ready,
 * the subscriber reconnects by itself, and meanwhile workers fall back to their poll.
 */
export function createWakeChannel(opts: WakeChannelOptions): WakeChannel {
  const channel = opts.channel ?? WAKE_CHANNEL;
  // Our own messages come back through Redis; this process's subscribers were already called.
  const origin = randomBase62(12);
  const listeners: (() => void)[] = [];
  const wakeLocal = () => {
    for (const listener of listeners) listener();
  };
  /** Calls in one turn of the event loop become one: this process's subscribers, then `alsoSend`. */
  const coalesced = (alsoSend: () => void = () => {}) => {
    let pending = false;
    return () => {
      if (pending) return;
      pending = true;
      setImmediate(() => {
        pending = false;
        wakeLocal();
        alsoSend();
      });
    };
  };

  if (!opts.redisUrl) {
    return {
      publish: coalesced(),
      subscribe: (onWake) => void listeners.push(onWake),
      live: () => false,
      close: async () => {},
    };
  }

  const secrets = redisUrlSecrets(opts.redisUrl);
  const scrub = (text: string) => secrets.reduce((t, s) => t.split(s).join('[redacted]'), text);
  const publisher = new Redis(opts.redisUrl, WAKE_REDIS_OPTIONS);
  const subscriber = new Redis(opts.redisUrl, WAKE_REDIS_OPTIONS);
  let subscribed = false;
  let closing = false;
  let down = false; // a warning was logged and no subscription since

  function reportFailure(err: unknown) {
    if (closing || down) return; // one warning an outage
    down = true;
    // Only message and code: a ReplyError can carry the command's arguments (AUTH's password).
    const e = err as { message?: string; code?: string };
    opts.logger.warn(
      { component: 'event-wake', reason: { message: scrub(String(e?.message ?? err)), code: e?.code } },
      'Redis unavailable: delivery workers in other processes learn of new events by polling until it returns',
    );
  }

  for (const connection of [publisher, subscriber]) {
    // Without a listener ioredis prints every reconnect failure to stderr, URL included.
    connection.on('error', reportFailure);
    connection.on('close', () => {
      if (connection === subscriber) subscribed = false;
      reportFailure(new Error('connection to Redis lost; reconnecting'));
    });
  }
  subscriber.on('message', (_channel: string, from: string) => {
    if (from !== origin) wakeLocal();
  });
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).then(
      () => {
        subscribed = true;
        if (down) opts.logger.info({ component: 'event-wake' }, 'Redis ready again: delivery workers are woken across processes again');
        down = false;
        wakeLocal(); // events written while we were not listening
      },
      reportFailure,
    );
  });

  return {
    publish: coalesced(() => {
      if (publisher.status !== 'ready') return; // the others poll meanwhile
      publisher.publish(channel, origin).catch(reportFailure);
    }),
    subscribe: (onWake) => void listeners.push(onWake),
    live: () => subscribed && subscriber.status === 'ready',
    async close() {
      closing = true;
      subscribed = false;
      await Promise.all([closeRedis(publisher), closeRedis(subscriber)]);
    },
  };
}

export interface AdaptivePoll {
  /** How long to wait before the next look, given whether the last one found work. */
  nextDelay(foundWork: boolean): number;
}

/**
 * The poll of a worker that nobody wakes (no Redis, or Redis away): `minMs` while events keep
 * coming (within `activeMs` of the last look that found work), then doubling up to `maxMs`, so an
 * idle worker costs one query a `maxMs` and a busy one picks up new events within `minMs`.
 */
export function adaptivePoll(opts: { minMs: number; maxMs: number; activeMs?: number; now?: () => number }): AdaptivePoll {
  const now = opts.now ?? Date.now;
  const activeMs = opts.activeMs ?? 1000;
  let lastWorkAt = -Infinity;
  let delay = opts.maxMs;
  return {
    nextDelay(foundWork) {
      const t = now();
      if (foundWork) lastWorkAt = t;
      delay = t - lastWorkAt < activeMs ? opts.minMs : Math.min(opts.maxMs, delay * 2);
      return delay;
    },
  };
}
