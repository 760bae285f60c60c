import Redis, { RedisOptions } from 'ioredis';
import { randomBase62 } from '../platform/crypto';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../platform/redis';

/**
 * What a committed event touched: delivery workers look for due rows when told of one, and the chat
 * window's live streams wake only the streams of its site and visitor.
 */
export interface CommittedEvent {
  id: string;
  siteId: string;
  visitorId: string;
  createdAt: number;
}

/**
 * Notices of the inbox's private changes (assignments, read marks, server/inbox): no event of the
 * outbox stands behind them, so the chat window's live hub skips them (a delivery worker woken by
 * one finds nothing due).
 */
export const INBOX_NOTICE_PREFIX = 'inbox:';
export const isInboxNotice = (e: CommittedEvent) => e.id.startsWith(INBOX_NOTICE_PREFIX);

/**
 * Told of the events commits wrote, or `null` when events may have been committed that this
 * process was not told of (Redis came back after an outage, or a message it could not read): the
 * listener then looks in the database itself.
 */
export type EventListener = (events: readonly CommittedEvent[] | null) => void;

/**
 * The shared fail-fast settings (server/platform/redis.ts): a writer never waits for Redis. A
 * notice lost in an outage costs nothing but latency, because listeners keep polling.
 */
export const EVENT_CHANNEL_REDIS_OPTIONS: RedisOptions = {
  ...FAIL_FAST_REDIS_OPTIONS,
  // The subscription is renewed by us on every `ready`, together with a catch-up notice.
  autoResubscribe: false,
  // How long a close waits for the socket to end before destroying it (ioredis' 2 s holds a
  // stopping worker's exit back when Redis is away).
  disconnectTimeout: 200,
};

/** The Redis channel; processes of an older release listen here too and take any message as a wake-up. */
export const EVENT_CHANNEL = 'chat:events:wake';

/** Beyond this many events in one message, other processes are only told to look (one message stays small). */
const MAX_EVENTS_PER_MESSAGE = 500;
/** Messages kept while the publisher connects, at most, and how long they are worth sending late. */
const UNSENT_MAX = 64;
const UNSENT_TTL_MS = 5_000;
/** How long `close()` waits for a first connection to send what was kept (a CLI command exits right after its write). */
const CLOSE_FLUSH_MS = 300;

/**
 * A Redis message: the sender's id, a space, then the events as JSON (nothing after the id when
 * there were too many to list). The sender's id lets a process skip its own messages.
 */
export function encodeNotice(origin: string, events: readonly CommittedEvent[]): string {
  if (events.length > MAX_EVENTS_PER_MESSAGE) return origin;
  return `${origin} ${JSON.stringify(events.map((e) => ({ id: e.id, siteId: e.siteId, visitorId: e.visitorId, createdAt: e.createdAt })))}`;
}

const isCommittedEvent = (e: unknown): e is CommittedEvent => {
  const c = e as Partial<CommittedEvent> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.id === 'string' &&
    typeof c.siteId === 'string' &&
    typeof c.visitorId === 'string' &&
    Number.isFinite(c.createdAt)
  );
};

/** The sender and the events of a message; `events` null when it lists none (an older release's wake-up, too many, or unreadable). */
export function decodeNotice(message: string): { from: string; events: CommittedEvent[] | null } {
  const space = message.indexOf(' ');
  if (space < 0) return { from: message, events: null };
  const from = message.slice(0, space);
  try {
    const events: unknown = JSON.parse(message.slice(space + 1));
    return { from, events: Array.isArray(events) && events.every(isCommittedEvent) ? events : null };
  } catch {
    return { from, events: null };
  }
}

interface ChannelLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface EventChannelOptions {
  /** Unset: notices stay within this process, and other processes rely on polling alone. */
  redisUrl?: string;
  /** Where Redis trouble is reported (once an outage); needed with `redisUrl`. */
  logger?: ChannelLogger;
  /** Redis channel name (tests use their own). */
  channel?: string;
}

export interface EventChannel {
  /**
   * These events were committed: tell this process's listeners and, with Redis, every other
   * process's. Call it after the commit (the outbox does). Never throws, never waits; calls in the
   * same turn of the event loop are told as one batch.
   */
  publish(events: readonly CommittedEvent[]): void;
  /** `listener` hears every batch from now on; returns the unsubscribe. */
  subscribe(listener: EventListener): () => void;
  /** Whether notices from other processes arrive now; while false, listeners poll briskly. */
  live(): boolean;
  close(): Promise<void>;
}

const silentLogger: ChannelLogger = { warn() {}, info() {} };

/**
 * The one way processes learn of committed events: delivery workers and the chat window's live
 * streams both listen here. In-process without REDIS_URL; with it, Redis pub/sub across processes.
 * Redis going away never breaks a writer or a listener: publishing is skipped while the connection
 * is not ready, the subscriber reconnects by itself (and then tells its listeners to look), and
 * meanwhile listeners fall back to their polls.
 */
export function createEventChannel(opts: EventChannelOptions = {}): EventChannel {
  const logger = opts.logger ?? silentLogger;
  const channel = opts.channel ?? EVENT_CHANNEL;
  // Our own messages come back through Redis; this process's listeners were already told.
  const origin = randomBase62(12);
  const listeners = new Set<EventListener>();
  const tell = (events: readonly CommittedEvent[] | null) => {
    for (const listener of [...listeners]) {
      try {
        listener(events);
      } catch {
        // one listener's failure is its own; the others are still told
      }
    }
  };
  const subscribe = (listener: EventListener) => {
    listeners.add(listener);
    return () => void listeners.delete(listener);
  };

  /** Events published in this turn of the event loop; told as one batch on the next. */
  let batch: CommittedEvent[] = [];
  let scheduled = false;
  let sendOut: (events: CommittedEvent[]) => void = () => {};
  function flush() {
    scheduled = false;
    const events = batch;
    batch = [];
    if (!events.length) return;
    tell(events);
    sendOut(events);
  }
  const publish = (events: readonly CommittedEvent[]) => {
    if (!events.length) return;
    batch.push(...events);
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };

  if (!opts.redisUrl) return { publish, subscribe, live: () => false, close: async () => {} };

  const secrets = redisUrlSecrets(opts.redisUrl);
  const scrub = (text: string) => secrets.reduce((t, s) => t.split(s).join('[redacted]'), text);
  const publisher = new Redis(opts.redisUrl, EVENT_CHANNEL_REDIS_OPTIONS);
  const subscriber = new Redis(opts.redisUrl, EVENT_CHANNEL_REDIS_OPTIONS);
  let subscribed = false;
  let closing = false;
  let down = false; // a warning was logged and no subscription since
  /** Messages not sent because the publisher was not ready yet; sent when it is, if still recent. */
  let unsent: { message: string; at: number }[] = [];

  function reportFailure(err: unknown) {
    if (closing || down) return; // one warning an outage
    down = true;
    // Only message and code: a ReplyError can carry the command's arguments (AUTH's password).
    const e = err as { message?: string; code?: string };
    logger.warn(
      { component: 'event-channel', reason: { message: scrub(String(e?.message ?? err)), code: e?.code } },
      'Redis unavailable: delivery workers and live streams in other processes learn of new events by polling until it returns',
    );
  }

  function send(message: string) {
    if (publisher.status !== 'ready') {
      unsent.push({ message, at: Date.now() });
      if (unsent.length > UNSENT_MAX) unsent.shift();
      return; // the others poll meanwhile
    }
    publisher.publish(channel, message).catch(reportFailure);
  }
  sendOut = (events) => send(encodeNotice(origin, events));

  for (const connection of [publisher, subscriber]) {
    // Without a listener ioredis prints every reconnect failure to stderr, URL included.
    connection.on('error', reportFailure);
    connection.on('close', () => {
      if (connection === subscriber) subscribed = false;
      reportFailure(new Error('connection to Redis lost; reconnecting'));
    });
  }
  publisher.on('ready', () => {
    const since = Date.now() - UNSENT_TTL_MS;
    const late = unsent.filter((u) => u.at >= since);
    unsent = [];
    for (const u of late) send(u.message);
  });
  subscriber.on('message', (_channel: string, message: string) => {
    const notice = decodeNotice(message);
    if (notice.from !== origin) tell(notice.events);
  });
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).then(() => {
      subscribed = true;
      if (down) logger.info({ component: 'event-channel' }, 'Redis ready again: delivery workers and live streams hear of events across processes again');
      down = false;
      tell(null); // events written while we were not listening
    }, reportFailure);
  });

  return {
    publish,
    subscribe,
    live: () => subscribed && subscriber.status === 'ready',
    async close() {
      if (scheduled) flush();
      // A first connection still under way (a CLI command that wrote and ends): wait a moment for it.
      if (unsent.length && (publisher.status === 'connecting' || publisher.status === 'connect')) await readyOrGiveUp(publisher, CLOSE_FLUSH_MS);
      closing = true;
      subscribed = false;
      await Promise.all([closeRedis(publisher), closeRedis(subscriber)]);
    },
  };
}

/** Resolves when `redis` is ready, fails, or after `ms`, whichever comes first. */
function readyOrGiveUp(redis: Redis, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const event of ['ready', 'error', 'end'] as const) redis.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const event of ['ready', 'error', 'end'] as const) redis.once(event, done);
  });
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
