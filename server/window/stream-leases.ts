import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../platform/redis';
import type { Logger } from '../platform/logger';

/** One open stream as the shared count sees it: its id sorts by the time it started; `until` is when its lease lapses. */
export interface Lease {
  id: string;
  until: number;
}

/** A stream id that sorts by start time (then by the order a process opened its streams). */
export function streamId(now: number, instance: string, seq: number): string {
  return `${String(now).padStart(15, '0')}.${instance}.${seq.toString(36).padStart(8, '0')}`;
}

/** Whether a new stream may open: refused, or accepted in place of the holder's oldest (`replace`), or beside the others. */
export type Admission = { accept: false } | { accept: true; replace: string | null };

/**
 * The counting rule of live streams, for one process's streams (leases that never lapse) and for
 * every instance's (leases in Redis): leases past `until` do not count (their instance died); a
 * holder at its limit gives up its oldest stream for the new one, which that slot makes room for
 * in the client address's count too; a client address at its limit is refused.
 */
export function admitStream(input: { holder: Lease[]; clientIp: Lease[]; now: number; perHolder: number; perClientIp: number }): Admission {
  const live = (leases: Lease[]) => leases.filter((l) => l.until > input.now).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const holder = live(input.holder);
  const replace = holder.length >= input.perHolder ? holder[0].id : null;
  const clientIp = live(input.clientIp).filter((l) => l.id !== replace).length;
  if (clientIp >= input.perClientIp) return { accept: false };
  return { accept: true, replace };
}

/**
 * The same rule in Redis, atomically: KEYS = the holder's hash and the client address's hash (field =
 * stream id, value = lease end); ARGV = now, lease end, perHolder, perClientIp, new id, key TTL (ms).
 * Lapsed leases are removed on the way. Answers {1, replaced id or ''} or {0, ''}.
 */
const ADMIT_SCRIPT = `
local now = tonumber(ARGV[1])
local function live(key)
  local flat = redis.call('HGETALL', key)
  local ids = {}
  for i = 1, #flat, 2 do
    if tonumber(flat[i + 1]) <= now then redis.call('HDEL', key, flat[i]) else ids[#ids + 1] = flat[i] end
  end
  table.sort(ids)
  return ids
end
local holder = live(KEYS[1])
local ips = live(KEYS[2])
local replaced = ''
if #holder >= tonumber(ARGV[3]) then replaced = holder[1] end
local count = 0
for _, id in ipairs(ips) do if id ~= replaced then count = count + 1 end end
if count >= tonumber(ARGV[4]) then return {0, ''} end
if replaced ~= '' then
  redis.call('HDEL', KEYS[1], replaced)
  redis.call('HDEL', KEYS[2], replaced)
end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[5], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {1, replaced}
`;

/** A stream's place in the shared count: where its lease is kept. */
export interface LeaseKeys {
  id: string;
  holderKey: string;
  clientIpKey: string;
}

/** The shared count of one kind of stream (the window's, the inbox's). */
export interface SharedStreamCount {
  /** A new stream id, sortable by start time and unique across instances. */
  newId(now: number): string;
  /** The shared decision, or null when Redis is away (the caller counts this process's streams alone). */
  admit(keys: LeaseKeys, limits: { perHolder: number; perClientIp: number }, now: number): Promise<Admission | null>;
  /** Extends the stream's lease (every heartbeat); writes it back after an outage, so it counts again. */
  renew(keys: LeaseKeys, now: number): void;
  release(keys: LeaseKeys): void;
  /** Ends a stream of this process when another instance's admission replaced it; returns the unsubscribe. */
  onReplaced(id: string, end: () => void): () => void;
}

export interface StreamLeases {
  /** The count of one kind of stream; each kind has its own keys. */
  kind(name: string): SharedStreamCount;
  close(): Promise<void>;
}

/**
 * Live streams counted across instances over Redis. Each open stream holds a lease that its
 * heartbeat renews; an instance that dies stops renewing, so its streams stop counting once their
 * leases lapse (`leaseMs`, three heartbeats by default). While Redis is away every call answers
 * null or does nothing, and the registry counts its own process's streams (as without REDIS_URL).
 * A holder's oldest stream on another instance is ended by a message on a Redis channel.
 */
export function createStreamLeases(opts: { redisUrl: string; leaseMs: number; logger: Logger; prefix?: string }): StreamLeases {
  const prefix = opts.prefix ?? 'chat:streams:';
  const instance = randomBytes(6).toString('hex');
  const redis = new Redis(opts.redisUrl, FAIL_FAST_REDIS_OPTIONS);
  const subscriber = new Redis(opts.redisUrl, FAIL_FAST_REDIS_OPTIONS);
  const secrets = redisUrlSecrets(opts.redisUrl);
  const scrub = (text: string) => secrets.reduce((t, s) => t.split(s).join('[redacted]'), text);
  let warned = false;
  const onError = (err: Error) => {
    if (warned) return;
    warned = true;
    opts.logger.warn({ reason: scrub(err.message) }, 'Redis unavailable: live streams are counted per instance until it returns');
  };
  redis.on('error', onError);
  subscriber.on('error', onError);
  redis.on('ready', () => {
    if (warned) opts.logger.info({}, 'Redis ready again: live streams are counted across instances again');
    warned = false;
  });
  const replacedChannel = `${prefix}replaced`;
  const local = new Map<string, () => void>();
  // At every (re)connection: a subscription refused while Redis was away at start is never retried by ioredis.
  subscriber.on('ready', () => void subscriber.subscribe(replacedChannel).catch(() => {}));
  subscriber.on('message', (_channel: string, id: string) => local.get(id)?.());
  let seq = 0;

  return {
    kind(name) {
      const holderHash = (k: LeaseKeys) => `${prefix}${name}:holder:${k.holderKey}`;
      const ipHash = (k: LeaseKeys) => `${prefix}${name}:ip:${k.clientIpKey}`;
      const ttl = String(opts.leaseMs * 2);
      return {
        newId: (now) => streamId(now, instance, seq++),
        async admit(keys, limits, now) {
          if (redis.status !== 'ready') return null;
          try {
            const args = [now, now + opts.leaseMs, limits.perHolder, limits.perClientIp, keys.id, ttl];
            const [accepted, replaced] = (await redis.eval(ADMIT_SCRIPT, 2, holderHash(keys), ipHash(keys), ...args)) as [number, string];
            if (!accepted) return { accept: false };
            if (replaced) {
              // The replaced stream is this process's, or another's: its owner ends it either way.
              if (local.has(replaced)) local.get(replaced)!();
              else await redis.publish(replacedChannel, replaced);
            }
            return { accept: true, replace: null };
          } catch (err) {
            onError(err as Error);
            return null;
          }
        },
        renew(keys, now) {
          if (redis.status !== 'ready') return;
          const until = String(now + opts.leaseMs);
          redis
            .multi()
            .hset(holderHash(keys), keys.id, until)
            .hset(ipHash(keys), keys.id, until)
            .pexpire(holderHash(keys), ttl)
            .pexpire(ipHash(keys), ttl)
            .exec()
            .catch(onError);
        },
        release(keys) {
          if (redis.status !== 'ready') return;
          redis.multi().hdel(holderHash(keys), keys.id).hdel(ipHash(keys), keys.id).exec().catch(onError);
        },
        onReplaced(id, end) {
          local.set(id, end);
          return () => local.delete(id);
        },
      };
    },
    async close() {
      await Promise.all([closeRedis(redis), closeRedis(subscriber)]);
    },
  };
}
