import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { closeRedis, FAIL_FAST_REDIS_OPTIONS, redisUrlSecrets } from '../platform/redis';
import type { Logger } from '../platform/logger';

export interface Presence {
  /** Marks a member's live inbox stream open on a site until the returned function is called. */
  open(siteId: string, accountId: string): () => void;
  /** Accounts with a live inbox stream on the site, on any instance (Redis when REDIS_URL is set:
   *  keys with a TTL refreshed while open, so a killed instance's entries expire; in-process otherwise). */
  online(siteId: string): Promise<Set<string>>;
  /** Stops refreshing and closes the Redis connection (a no-op in process). */
  close(): Promise<void>;
}

/** One open stream of this process: the site, the account, and its entry's id across instances. */
interface Entry {
  siteId: string;
  accountId: string;
  field: string;
}

/** This process's open streams by site; the in-process answer, and the Redis one's fallback. */
function createLocalEntries() {
  const bySite = new Map<string, Set<Entry>>();
  return {
    add(entry: Entry) {
      let set = bySite.get(entry.siteId);
      if (!set) bySite.set(entry.siteId, (set = new Set()));
      set.add(entry);
    },
    remove(entry: Entry) {
      const set = bySite.get(entry.siteId);
      if (!set) return;
      set.delete(entry);
      if (!set.size) bySite.delete(entry.siteId);
    },
    accounts: (siteId: string) => new Set([...(bySite.get(siteId) ?? [])].map((e) => e.accountId)),
    all: () => [...bySite.values()].flatMap((set) => [...set]),
  };
}

/** Presence within this process alone: right for one instance (no REDIS_URL). */
export function createLocalPresence(): Presence {
  const entries = createLocalEntries();
  return {
    open(siteId, accountId) {
      const entry = { siteId, accountId, field: '' };
      entries.add(entry);
      return () => entries.remove(entry);
    },
    online: async (siteId) => entries.accounts(siteId),
    close: async () => {},
  };
}

/**
 * Presence across instances: a hash a site (`<prefix><siteId>`), one field an open stream
 * (`<accountId> <instance>.<seq>`) whose value is when it lapses. This process rewrites its fields
 * every `refreshMs` and the hash's TTL with them, so a killed instance's fields stop counting after
 * `ttlMs` and its hash goes once no instance refreshes it. Redis away: this process's own streams.
 */
export function createRedisPresence(opts: { redisUrl: string; logger: Logger; ttlMs?: number; refreshMs?: number; prefix?: string }): Presence {
  const ttlMs = opts.ttlMs ?? 45_000;
  const refreshMs = opts.refreshMs ?? Math.floor(ttlMs / 3);
  const prefix = opts.prefix ?? 'chat:presence:';
  const instance = randomBytes(6).toString('hex');
  const redis = new Redis(opts.redisUrl, FAIL_FAST_REDIS_OPTIONS);
  const secrets = redisUrlSecrets(opts.redisUrl);
  let warned = false;
  const onError = (err: Error) => {
    if (warned) return;
    warned = true;
    const reason = secrets.reduce((t, s) => t.split(s).join('[redacted]'), err.message);
    opts.logger.warn({ reason }, 'Redis unavailable: inbox presence is this instance alone until it returns');
  };
  redis.on('error', onError);
  redis.on('ready', () => {
    warned = false;
    refresh();
  });
  const entries = createLocalEntries();
  let seq = 0;

  function write(list: Entry[]) {
    if (!list.length || redis.status !== 'ready') return;
    const until = String(Date.now() + ttlMs);
    const multi = redis.multi();
    for (const e of list) multi.hset(prefix + e.siteId, e.field, until).pexpire(prefix + e.siteId, ttlMs);
    multi.exec().catch(onError);
  }
  const refresh = () => write(entries.all());
  const timer = setInterval(refresh, refreshMs);
  timer.unref();

  return {
    open(siteId, accountId) {
      const entry = { siteId, accountId, field: `${accountId} ${instance}.${(seq++).toString(36)}` };
      entries.add(entry);
      write([entry]);
      return () => {
        entries.remove(entry);
        if (redis.status === 'ready') redis.hdel(prefix + siteId, entry.field).catch(onError);
      };
    },
    async online(siteId) {
      const mine = entries.accounts(siteId);
      if (redis.status !== 'ready') return mine;
      try {
        const fields = await redis.hgetall(prefix + siteId);
        const now = Date.now();
        for (const [field, until] of Object.entries(fields)) if (Number(until) > now) mine.add(field.split(' ')[0]);
      } catch (err) {
        onError(err as Error);
      }
      return mine;
    },
    async close() {
      clearInterval(timer);
      await closeRedis(redis);
    },
  };
}
