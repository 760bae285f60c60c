import type { Request, Response } from 'express';
import { ApiError } from '../platform/errors';
import type { Logger } from '../platform/logger';
import type { WindowClaims } from './tokens';
import { encodePosition, Feed, FeedEvent, FeedPosition } from './feed';
import type { LiveHub } from './live';
import { clientIpBucket } from '../http/rate-limit/client-ip';

export interface StreamLimits {
  /** Streams one visitor may hold; a new one beyond this, once accepted, ends the visitor's oldest (a reload leaves one behind). */
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

interface OpenStream {
  visitorKey: string;
  clientIpKey: string;
  end(): void;
}

/**
 * The live streams of the window entry (Server-Sent Events). A stream starts at a feed position,
 * writes every event after it, and is woken by the live hub when its visitor has news; it also re-reads
 * at each heartbeat, which catches anything the hub could not see. It ends when the window token
 * expires (the window reconnects with a fresh token and Last-Event-ID) or when the client goes.
 */
export function createStreamRegistry(limits: Partial<StreamLimits> = {}) {
  const { perVisitor, total, perClientIp, heartbeatMs } = { ...DEFAULTS, ...limits };
  const open = new Set<OpenStream>();
  const byVisitor = new Map<string, OpenStream[]>();
  const byClientIp = new Map<string, number>();

  function remove(s: OpenStream) {
    open.delete(s);
    const n = (byClientIp.get(s.clientIpKey) ?? 1) - 1;
    if (n > 0) byClientIp.set(s.clientIpKey, n);
    else byClientIp.delete(s.clientIpKey);
    const list = byVisitor.get(s.visitorKey);
    if (!list) return;
    const i = list.indexOf(s);
    if (i >= 0) list.splice(i, 1);
    if (!list.length) byVisitor.delete(s.visitorKey);
  }

  return {
    count: () => open.size,

    open(
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
      const visitorKey = `${claims.siteId}:${claims.visitorId}`;
      const clientIpKey = clientIpBucket(req.ip ?? '');
      const mine = byVisitor.get(visitorKey) ?? [];
      // The visitor's oldest stream makes room only for a new one that will be accepted: its slot
      // counts as free in the checks, and it ends after them.
      const replaced = mine.length >= perVisitor ? mine[0] : undefined;
      const totalAfter = open.size - (replaced ? 1 : 0);
      const clientIpAfter = (byClientIp.get(clientIpKey) ?? 0) - (replaced?.clientIpKey === clientIpKey ? 1 : 0);
      if (totalAfter >= total || clientIpAfter >= perClientIp) {
        throw new ApiError('service_unavailable', 'Too many live connections right now; poll /events/poll instead.', undefined, { 'Retry-After': '10' });
      }
      // The client may have gone during the checks before this (their 'close' is past): not a stream.
      if (res.destroyed || req.destroyed) return;
      replaced?.end();

      let position = ctx.from;
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
      const send = (e: { id: string; event: string; data: unknown }) => write(`id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);

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
              const read = await feed.read(claims.siteId, claims.visitorId, position, 100);
              for (const e of read.events as FeedEvent[]) send(e);
              position = read.position;
              more = read.more;
            }
          } while (readAgain && !ended);
        } catch (err) {
          // The database is away for a moment: the next wake or heartbeat reads again.
          ctx.logger.warn({ err: { message: (err as Error).message } }, 'window stream read failed');
        } finally {
          reading = false;
        }
      };

      const stream: OpenStream = {
        visitorKey,
        clientIpKey,
        end() {
          if (ended) return;
          ended = true;
          clearInterval(heartbeat);
          clearTimeout(expiry);
          unsubscribe();
          remove(stream);
          if (!res.writableEnded) res.end();
        },
      };
      open.add(stream);
      byClientIp.set(clientIpKey, (byClientIp.get(clientIpKey) ?? 0) + 1);
      mine.push(stream);
      byVisitor.set(visitorKey, mine);

      // The window answers this by asking for a new token (which may be refused) and reconnecting.
      const expire = () => {
        write(`event: token-expired\ndata: {}\n\n`);
        stream.end();
      };
      const unsubscribe = ctx.live.subscribe(claims.siteId, claims.visitorId, () => void pump());
      // A token checked once at the start would outlive a revocation by up to its lifetime: the
      // site's settings are read again at each heartbeat (one keyed read), and a refused stream
      // ends as if its token expired, so the window asks the gateway, which refuses or starts over.
      const recheck = async () => {
        try {
          if (ended || !ctx.refusal || (await ctx.refusal()) === null) return;
        } catch {
          return; // the database is away for a moment: keep the stream, ask again at the next beat
        }
        expire();
      };
      const heartbeat = setInterval(() => {
        write(': ping\n\n');
        void recheck();
        void pump();
      }, heartbeatMs);
      // The token's lifetime is the stream's: a refused visitor or origin stops within minutes.
      const expiry = setTimeout(expire, Math.max(0, claims.expiresAt - ctx.now()));
      res.on('close', () => stream.end());

      write('retry: 2000\n\n');
      send({ id: encodePosition(position), event: 'ready', data: { lastEventId: encodePosition(position) } });
      void pump();
    },

    /** Ends every stream (shutdown). */
    closeAll() {
      for (const s of [...open]) s.end();
    },
  };
}
