import type { Request, Response } from 'express';
import { ApiError } from '../platform/errors';
import type { Logger } from '../platform/logger';
import type { WindowClaims } from './tokens';
import { encodePosition, Feed, FeedEvent, FeedPosition } from './feed';
import type { LiveHub } from './live';
import { clientIpBucket } from '../http/rate-limit/client-ip';
import { admitStream, Lease, LeaseKeys, SharedStreamCount, streamId } from './stream-leases';

export interface StreamLimits {
  /** Streams one holder (a visitor, or a member for the inbox) may hold; a new one beyond this, once accepted, ends the holder's oldest (a reload leaves one behind). */
  perVisitor: number;
  /** Streams this process holds at most; beyond it the answer is 503 and the window polls. Keep it
   * well below HTTP_MAX_CONNECTIONS, or live streams alone could take every connection of the API. */
  total: number;
  /** Streams one client IP (IPv6 by /64) may hold: minting anonymous visitors must not reach `total`. */
  perClientIp: number;
  /** A comment line this often keeps proxies from closing an idle stream; the feed is re-read then too. */
  heartbeatMs: number;
}

const DEFAULTS: StreamLimits = { perVisitor: 5, total: 500, perClientIp: 20, heartbeatMs: 15_000 };

/** How long a stream counts across instances without a heartbeat renewing it: three beats, so a late beat loses nothing. */
export const STREAM_LEASE_MS = 3 * DEFAULTS.heartbeatMs;

interface OpenStream extends LeaseKeys {
  end(): void;
}

/** This process's streams as leases that never lapse: the local count follows the shared rule. */
const asLeases = (streams: OpenStream[] | undefined): Lease[] => (streams ?? []).map((s) => ({ id: s.id, until: Infinity }));

/** One event of a stream: its id is the position a reconnect resumes after (Last-Event-ID). */
export interface StreamEvent {
  id: string;
  event: string;
  data: unknown;
}

/**
 * What a live stream reads and who holds it: the window's visitor feed, or the inbox of a site for
 * a member (server/inbox). Positions are the source's own; only `encode` turns them into event ids.
 */
export interface StreamSource<P> {
  /** Whose stream it is (a visitor of a site, an account): the per-holder limit counts by it. */
  holderKey: string;
  from: P;
  read(from: P, max: number): Promise<{ events: StreamEvent[]; position: P; more: boolean }>;
  encode(position: P): string;
  /** Wakes the stream when the source may have news; returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
  /**
   * Ephemeral events for this stream (someone typing): written at once without an id, so a
   * reconnect's Last-Event-ID never points at one, and never read back. Returns the unsubscribe.
   */
  signals?(push: (e: { event: string; data: unknown }) => void): () => void;
  /** When the credential ends: the stream ends then with `endEvent`. */
  expiresAt: number;
  /** The event that tells the client its credential ended (it renews it and reconnects with Last-Event-ID). */
  endEvent: string;
  /** The 503's message when the limits are reached. */
  busyMessage: string;
  /** Asked at every heartbeat: why the credential may no longer be used, or null. */
  refusal?: () => Promise<string | null>;
  /** More of the `ready` event's data beside `lastEventId` (the inbox: its tail and whether the resume has a gap). */
  readyData?: Record<string, unknown>;
  logger: Logger;
  now: () => number;
}

/**
 * Live streams (Server-Sent Events) of one kind: the chat window's, or the inbox's. A stream starts
 * at a position of its source, writes every event after it, and is woken when its source may have
 * news; it also re-reads at each heartbeat, which catches anything a wake-up could not see. It ends
 * when its credential expires or is refused (the client renews it and reconnects with
 * Last-Event-ID) or when the client goes.
 */
export function createStreamRegistry(limits: Partial<StreamLimits> & { shared?: SharedStreamCount } = {}) {
  const { perVisitor: perHolder, total, perClientIp, heartbeatMs } = { ...DEFAULTS, ...limits };
  const shared = limits.shared;
  const open = new Set<OpenStream>();
  const byHolder = new Map<string, OpenStream[]>();
  const byClientIp = new Map<string, OpenStream[]>();
  let seq = 0;

  const drop = (map: Map<string, OpenStream[]>, key: string, s: OpenStream) => {
    const list = map.get(key);
    if (!list) return;
    const i = list.indexOf(s);
    if (i >= 0) list.splice(i, 1);
    if (!list.length) map.delete(key);
  };
  const add = (map: Map<string, OpenStream[]>, key: string, s: OpenStream) => map.set(key, [...(map.get(key) ?? []), s]);

  function remove(s: OpenStream) {
    open.delete(s);
    drop(byClientIp, s.clientIpKey, s);
    drop(byHolder, s.holderKey, s);
  }

  async function openSource<P>(req: Request, res: Response, source: StreamSource<P>) {
    const { holderKey } = source;
    const clientIpKey = clientIpBucket(req.ip ?? '');
    const now = source.now();
    const keys: LeaseKeys = { id: shared ? shared.newId(now) : streamId(now, 'local', seq++), holderKey, clientIpKey };
    const busy = () => new ApiError('service_unavailable', source.busyMessage, undefined, { 'Retry-After': '10' });
    // The holder's oldest stream makes room only for a new one that will be accepted: its slot
    // counts as free in the checks, and it ends after them.
    const own = admitStream({ holder: asLeases(byHolder.get(holderKey)), clientIp: asLeases(byClientIp.get(clientIpKey)), now, perHolder, perClientIp });
    let replaced = own.accept && own.replace ? byHolder.get(holderKey)?.find((s) => s.id === own.replace) : undefined;
    if (open.size - (replaced ? 1 : 0) >= total) throw busy(); // this process's connections: counted here alone
    // Every instance's streams when Redis answers (it ends the holder's oldest wherever it is);
    // this process's alone when it does not, as without REDIS_URL.
    const everywhere = shared ? await shared.admit(keys, { perHolder, perClientIp }, now) : null;
    if (everywhere) replaced = undefined;
    if (!(everywhere ?? own).accept) throw busy();
    // The client may have gone during the checks before this (their 'close' is past): not a stream.
    // Its connection tells, not `req.destroyed`: that is also true once a body (even an empty one
    // a GET sent with a Content-Type) has been read, and the client would wait for an answer forever.
    if (res.destroyed || req.socket.destroyed) {
      if (everywhere) shared?.release(keys);
      return;
    }
    replaced?.end();

    let position = source.from;
    let ended = false;
    let reading = false;
    let readAgain = false;

    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    // Reverse proxies (nginx) buffer answers unless told not to; a buffered stream is not live.
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    req.socket.setNoDelay(true);

    const write = (text: string) => {
      if (!ended && !res.writableEnded && !res.destroyed) res.write(text);
    };
    const send = (e: StreamEvent) => write(`id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);

    // Reads run one at a time; a wake during a read asks for one more read after it.
    const pump = async () => {
      if (ended) return;
      if (reading) {
        readAgain = true;
        return;
      }
      reading = true;
      try {
        do {
          readAgain = false;
          let more = true;
          for (let batch = 0; more && batch < 20 && !ended; batch++) {
            const read = await source.read(position, 100);
            for (const e of read.events) send(e);
            position = read.position;
            more = read.more;
          }
        } while (readAgain && !ended);
      } catch (err) {
        // The database is away for a moment: the next wake or heartbeat reads again.
        source.logger.warn({ err: { message: (err as Error).message } }, 'live stream read failed');
      } finally {
        reading = false;
      }
    };

    const stream: OpenStream = {
      ...keys,
      end() {
        if (ended) return;
        ended = true;
        clearInterval(heartbeat);
        clearTimeout(expiry);
        unsubscribe();
        unsignal();
        unreplaced();
        shared?.release(keys);
        remove(stream);
        if (!res.writableEnded) res.end();
      },
    };
    open.add(stream);
    add(byClientIp, clientIpKey, stream);
    add(byHolder, holderKey, stream);
    // Another instance's admission may take this stream's slot: it then ends like one replaced here.
    const unreplaced = shared?.onReplaced(keys.id, () => stream.end()) ?? (() => {});

    // The client answers this by renewing its credential (which may be refused) and reconnecting.
    const expire = () => {
      write(`event: ${source.endEvent}\ndata: {}\n\n`);
      stream.end();
    };
    const unsubscribe = source.subscribe(() => void pump());
    const unsignal = source.signals?.((e) => write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`)) ?? (() => {});
    // A credential checked once at the start would outlive a revocation by up to its lifetime: it
    // is checked again at each heartbeat (one keyed read), and a refused stream ends as if expired.
    const recheck = async () => {
      try {
        if (ended || !source.refusal || (await source.refusal()) === null) return;
      } catch {
        return; // the database is away for a moment: keep the stream, ask again at the next beat
      }
      expire();
    };
    const heartbeat = setInterval(() => {
      shared?.renew(keys, source.now());
      write(': ping\n\n');
      void recheck();
      void pump();
    }, heartbeatMs);
    // The credential's lifetime is the stream's (capped: a timer holds at most about 24.8 days).
    const expiry = setTimeout(expire, Math.min(2 ** 31 - 1, Math.max(0, source.expiresAt - source.now())));
    res.on('close', () => stream.end());

    write('retry: 2000\n\n');
    send({ id: source.encode(position), event: 'ready', data: { ...source.readyData, lastEventId: source.encode(position) } });
    void pump();
  }

  return {
    count: () => open.size,

    /** A stream of any source (the inbox's). */
    openSource,

    /** The chat window's stream of a visitor's feed. */
    async open(
      req: Request,
      res: Response,
      ctx: {
        claims: WindowClaims;
        from: FeedPosition;
        feed: Feed;
        live: LiveHub;
        logger: Logger;
        now: () => number;
        /** Asked at every heartbeat: why the token may no longer be used (a revocation, a rotated identity secret, a removed origin), or null. */
        refusal?: () => Promise<string | null>;
      },
    ) {
      const { claims, feed } = ctx;
      await openSource<FeedPosition>(req, res, {
        holderKey: `${claims.siteId}:${claims.visitorId}`,
        from: ctx.from,
        read: async (from, max) => {
          const read = await feed.read(claims.siteId, claims.visitorId, from, max);
          return { events: read.events as FeedEvent[], position: read.position, more: read.more };
        },
        encode: encodePosition,
        subscribe: (listener) => ctx.live.subscribe(claims.siteId, claims.visitorId, listener),
        signals: (push) => ctx.live.subscribeSignals(claims.siteId, claims.visitorId, push),
        // The token's lifetime is the stream's: a refused visitor or origin stops within minutes.
        expiresAt: claims.expiresAt,
        endEvent: 'token-expired',
        busyMessage: 'Too many live connections right now; poll /events/poll instead.',
        refusal: ctx.refusal,
        logger: ctx.logger,
        now: ctx.now,
      });
    },

    /** Ends every stream (shutdown). */
    closeAll() {
      for (const s of [...open]) s.end();
    },
  };
}
