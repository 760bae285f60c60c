import Redis, { RedisOptions } from 'ioredis';
import { randomBase62 } from '../platform/crypto';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../platform/redis';

/**
 * What a committed event of the outbox touched: delivery workers look for due rows when told of
 * one, the chat window's live streams wake only the streams of its site and visitor, and the
 * inbox's streams those of its site.
 */
export interface CommittedEvent {
  kind: 'event';
  id: string;
  siteId: string;
  visitorId: string;
  createdAt: number;
}

/**
 * A committed row of a site's inbox feed with no public event behind it (an assignment, a read
 * mark, a note, a "seen"): only the inbox's streams of the site wake for it.
 */
export interface InboxNotice {
  kind: 'inbox';
  siteId: string;
  /** The conversation's visitor. */
  visitorId: string;
  /** The row's position in the site's feed. */
  position: number;
  createdAt: number;
}

/**
 * An ephemeral signal (someone typing): nothing was written, so nothing can be read back. It is
 * passed as it is to the live streams it is meant for, the visitor's (`to: 'visitor'`) or the
 * site's members' (`to: 'members'`), and lost where nobody listens.
 */
export interface LiveSignal {
  kind: 'signal';
  siteId: string;
  visitorId: string;
  conversationId: string;
  to: 'visitor' | 'members';
  /** The stream event's name and `data` (documented in openapi/window.yaml and openapi/manage.yaml). */
  event: string;
  data: Record<string, unknown>;
}

/** A committed email of the mail queue: mail workers look for due rows when told of one. */
export interface MailNotice {
  kind: 'mail';
  id: string;
}

/** What travels on the channel; each listener hears only the kinds it asked for. */
export type ChannelMessage = CommittedEvent | InboxNotice | LiveSignal | MailNotice;
export type ChannelKind = ChannelMessage['kind'];

/** What a delivery worker listens for: only the outbox's events can make a delivery due. */
export const DELIVERY_KINDS: readonly ChannelKind[] = ['event'];
/** What a mail worker listens for: only a queued email can make one due. */
export const MAIL_KINDS: readonly ChannelKind[] = ['mail'];
const ALL_KINDS: readonly ChannelKind[] = ['event', 'inbox', 'signal', 'mail'];
/** Kinds that stand for rows in the database: a listener of one looks there when messages may have been missed. */
const STORED_KINDS: ReadonlySet<ChannelKind> = new Set(['event', 'inbox', 'mail']);

/**
 * Told of the messages of its kinds, or `null` when stored changes may have been committed that
 * this process was not told of (Redis came back after an outage, or a message it could not read):
 * the listener then looks in the database itself. Listeners of signals alone are never told `null`
 * (a lost signal is gone; there is nothing to look for).
 */
export type ChannelListener<M extends ChannelMessage = ChannelMessage> = (messages: readonly M[] | null) => void;

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
 * A Redis message: the sender's id, a space, then the messages as JSON (nothing after the id when
 * there were too many to list). The sender's id lets a process skip its own messages. Only the
 * fields of each kind are sent. An older release reads an outbox event as before (its fields are
 * the same, `kind` aside) and anything else as "look yourself".
 */
export function encodeNotice(origin: string, messages: readonly ChannelMessage[]): string {
  if (messages.length > MAX_EVENTS_PER_MESSAGE) return origin;
  return `${origin} ${JSON.stringify(messages.map(wireOf))}`;
}

function wireOf(m: ChannelMessage): ChannelMessage {
  switch (m.kind) {
    case 'event':
      return { kind: m.kind, id: m.id, siteId: m.siteId, visitorId: m.visitorId, createdAt: m.createdAt };
    case 'inbox':
      return { kind: m.kind, siteId: m.siteId, visitorId: m.visitorId, position: m.position, createdAt: m.createdAt };
    case 'signal':
      return { kind: m.kind, siteId: m.siteId, visitorId: m.visitorId, conversationId: m.conversationId, to: m.to, event: m.event, data: m.data };
    case 'mail':
      return { kind: m.kind, id: m.id };
  }
}

const isString = (v: unknown): v is string => typeof v === 'string';

/** The message an item of the wire stands for; `undefined` when unreadable, `null` for a kind of a newer release (skipped). */
function readItem(item: unknown): ChannelMessage | null | undefined {
  if (typeof item !== 'object' || item === null) return undefined;
  const c = item as Record<string, unknown>;
  // An email belongs to no visitor: its notice names the email alone.
  if (c.kind === 'mail') return isString(c.id) ? { kind: 'mail', id: c.id } : undefined;
  if (!isString(c.siteId) || !isString(c.visitorId)) return undefined;
  // Without a kind: an outbox event of an older release.
  const kind = c.kind ?? 'event';
  if (kind === 'event') {
    return isString(c.id) && Number.isFinite(c.createdAt)
      ? { kind, id: c.id, siteId: c.siteId, visitorId: c.visitorId, createdAt: c.createdAt as number }
      : undefined;
  }
  if (kind === 'inbox') {
    return Number.isSafeInteger(c.position) && Number.isFinite(c.createdAt)
      ? { kind, siteId: c.siteId, visitorId: c.visitorId, position: c.position as number, createdAt: c.createdAt as number }
      : undefined;
  }
  if (kind === 'signal') {
    const dataOk = typeof c.data === 'object' && c.data !== null && !Array.isArray(c.data);
    return isString(c.conversationId) && (c.to === 'visitor' || c.to === 'members') && isString(c.event) && dataOk
      ? { kind, siteId: c.siteId, visitorId: c.visitorId, conversationId: c.conversationId, to: c.to, event: c.event, data: c.data as Record<string, unknown> }
      : undefined;
  }
  return isString(kind) ? null : undefined;
}

/** The sender and the messages of a Redis message; `messages` null when it lists none (an older release's wake-up, too many, or unreadable). */
export function decodeNotice(message: string): { from: string; messages: ChannelMessage[] | null } {
  const space = message.indexOf(' ');
  if (space < 0) return { from: message, messages: null };
  const from = message.slice(0, space);
  try {
    const items: unknown = JSON.parse(message.slice(space + 1));
    if (!Array.isArray(items)) return { from, messages: null };
    const messages: ChannelMessage[] = [];
    for (const item of items) {
      const m = readItem(item);
      if (m === undefined) return { from, messages: null };
      if (m) messages.push(m);
    }
    return { from, messages };
  } catch {
    return { from, messages: null };
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
   * Tell this process's listeners and, with Redis, every other process's. Stored kinds are
   * published after their commit (the outbox and the inbox feed do). Never throws, never waits;
   * calls in the same turn of the event loop are told as one batch.
   */
  publish(messages: readonly ChannelMessage[]): void;
  /**
   * `listener` hears, from now on, every batch's messages of `kinds` (all kinds when omitted), and
   * is not called for a batch with none of them; returns the unsubscribe.
   */
  subscribe<K extends ChannelKind = ChannelKind>(listener: ChannelListener<Extract<ChannelMessage, { kind: K }>>, kinds?: readonly K[]): () => void;
  /** Whether notices from other processes arrive now; while false, listeners poll briskly. */
  live(): boolean;
  close(): Promise<void>;
}

const silentLogger: ChannelLogger = { warn() {}, info() {} };

/**
 * The one way processes learn of committed events, inbox feed rows and ephemeral signals: delivery
 * workers listen for events only, the live streams' hubs for what their streams show. In-process without REDIS_URL; with it, Redis pub/sub across processes.
 * Redis going away never breaks a writer or a listener: publishing is skipped while the connection
 * is not ready, the subscriber reconnects by itself (and then tells its listeners to look), and
 * meanwhile listeners fall back to their polls.
 */
export function createEventChannel(opts: EventChannelOptions = {}): EventChannel {
  const logger = opts.logger ?? silentLogger;
  const channel = opts.channel ?? EVENT_CHANNEL;
  // Our own messages come back through Redis; this process's listeners were already told.
  const origin = randomBase62(12);
  const listeners = new Set<{ listener: ChannelListener; kinds: ReadonlySet<ChannelKind>; stored: boolean }>();
  const tell = (messages: readonly ChannelMessage[] | null) => {
    for (const l of [...listeners]) {
      const mine = messages && messages.filter((m) => l.kinds.has(m.kind));
      if (mine ? !mine.length : !l.stored) continue;
      try {
        l.listener(mine);
      } catch {
        // one listener's failure is its own; the others are still told
      }
    }
  };
  const subscribe = <K extends ChannelKind>(listener: ChannelListener<Extract<ChannelMessage, { kind: K }>>, kinds?: readonly K[]) => {
    const own = { listener: listener as ChannelListener, kinds: new Set<ChannelKind>(kinds ?? ALL_KINDS), stored: false };
    own.stored = [...own.kinds].some((k) => STORED_KINDS.has(k));
    listeners.add(own);
    return () => void listeners.delete(own);
  };

  /** Messages published in this turn of the event loop; told as one batch on the next. */
  let batch: ChannelMessage[] = [];
  let scheduled = false;
  let sendOut: (messages: ChannelMessage[]) => void = () => {};
  function flush() {
    scheduled = false;
    const messages = batch;
    batch = [];
    if (!messages.length) return;
    tell(messages);
    // Signals and emails go in Redis messages of their own: an older release reads a message holding
    // anything it does not know as "look yourself", and kept apart the events still reach it as events.
    const signals = messages.filter((m) => m.kind === 'signal');
    const mail = messages.filter((m) => m.kind === 'mail');
    const stored = messages.filter((m) => m.kind === 'event' || m.kind === 'inbox');
    if (stored.length) sendOut(stored);
    if (signals.length) sendOut(signals);
    if (mail.length) sendOut(mail);
  }
  const publish = (messages: readonly ChannelMessage[]) => {
    if (!messages.length) return;
    batch.push(...messages);
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
  sendOut = (messages) => send(encodeNotice(origin, messages));

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
    if (notice.from !== origin) tell(notice.messages);
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
