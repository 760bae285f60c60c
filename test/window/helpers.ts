import https from 'node:https';
import request from 'supertest';
import type { Express } from 'express';
import { createHarness, Harness } from '../helpers/harness';

export const ORIGIN = 'https://shop.example';
export const OTHER_ORIGIN = 'https://evil.example';

export const w = (siteId: string, rest: string) => `/window/v1/sites/${siteId}${rest}`;

/**
 * How long a test waits for an event a live stream should get: a liveness bound, far above the
 * milliseconds a commit's notice takes and the hub's 500 ms poll even on a busy machine, and below the
 * streams' 15 s heartbeat, whose re-read would bring what a broken push left behind. Which path
 * brought an event is told by counting (polls held or read, heartbeats seen), never by how fast it came.
 */
export const ARRIVAL_MS = 10_000;

/**
 * A harness made before the file's tests and closed after them, whose main site's window is on
 * ORIGIN, with a clock the tests can move (token expiry without waiting); the clock is put back
 * after each test. `ready` receives the harness.
 */
export function windowHarnessWithClock(ready: (h: Harness) => void) {
  const clock = { offsetMs: 0, now: () => Date.now() + clock.offsetMs };
  let h: Harness | undefined;
  beforeAll(async () => {
    h = await createHarness({ now: clock.now });
    await allowOrigins(h, h.site.id);
    ready(h);
  });
  afterAll(() => h?.close());
  afterEach(() => {
    clock.offsetMs = 0;
  });
  return clock;
}

/** Lets `origins` embed the site's window (what `site update --allowed-origins` does). */
export async function allowOrigins(h: Harness, siteId: string, origins: string[] = [ORIGIN]) {
  await h.runtime.services.access.setAllowedOrigins(siteId, origins);
}

export interface TokenAnswer {
  token: string;
  visitorId: string;
  visitorCredential: string | null;
  verified: boolean;
  expiresAt: string;
  expiresIn: number;
  refreshAfter: number;
}

/** A window token from the gateway, as the host page's loader gets it. */
export async function getToken(app: Express, siteId: string, body: Record<string, unknown> = {}, origin = ORIGIN): Promise<TokenAnswer> {
  const res = await request(app).post(w(siteId, '/token')).set('Origin', origin).send(body);
  if (res.status !== 201) throw new Error(`token: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

export const auth = (token: string) => ({ Authorization: `Bearer ${token}` });

export interface SseEvent {
  id?: string;
  event: string;
  data: unknown;
}

export interface SseStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  events: SseEvent[];
  /** Comments received (the service's heartbeat writes `: ping` before each of its re-reads). */
  readonly pings: number;
  /** Resolves with the first event (seen or coming) after index `from` that matches, or fails after `timeoutMs`. */
  waitFor(match: (e: SseEvent) => boolean, timeoutMs?: number, from?: number): Promise<SseEvent>;
  ended: Promise<void>;
  close(): void;
}

/**
 * Reads a Server-Sent Events stream with a raw HTTPS request (a window would use fetch and a
 * stream reader: EventSource cannot send Authorization), parsing events as they arrive.
 */
export function openSse(
  base: { url: string; ca: string },
  path: string,
  headers: Record<string, string>,
  from: { localAddress?: string } = {},
): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const events: SseEvent[] = [];
    const waiters: { match: (e: SseEvent) => boolean; from: number; resolve: (e: SseEvent) => void }[] = [];
    let buffer = '';
    let pings = 0;
    let endResolve: () => void;
    const ended = new Promise<void>((r) => (endResolve = r));
    // A local address of 127.0.0.0/8 other than 127.0.0.1 stands for another client IP.
    const client = from.localAddress ? { localAddress: from.localAddress, family: 4 } : {};
    const req = https.request(
      new URL(path, base.url),
      { method: 'GET', ca: base.ca, headers: { Accept: 'text/event-stream', ...headers }, ...client },
      (res) => {
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let cut: number;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const e: Partial<SseEvent> & { lines: string[] } = { lines: [] };
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) pings++;
              if (line.startsWith(':') || line === '') continue;
              const i = line.indexOf(':');
              const field = i < 0 ? line : line.slice(0, i);
              const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
              if (field === 'id') e.id = value;
              else if (field === 'event') e.event = value;
              else if (field === 'data') e.lines.push(value);
            }
            if (!e.event && !e.lines.length) continue; // retry: or a comment
            const text = e.lines.join('\n');
            let data: unknown = text;
            try {
              data = JSON.parse(text);
            } catch {
              // not JSON: keep the text
            }
            const event: SseEvent = { id: e.id, event: e.event ?? 'message', data };
            events.push(event);
            for (const wtr of [...waiters]) {
              if (events.length - 1 >= wtr.from && wtr.match(event)) {
                waiters.splice(waiters.indexOf(wtr), 1);
                wtr.resolve(event);
              }
            }
          }
        });
        res.on('close', () => endResolve());
        res.on('error', () => endResolve());
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          events,
          get pings() {
            return pings;
          },
          ended,
          waitFor(match, timeoutMs = 5000, from = 0) {
            const seen = events.slice(from).find(match);
            if (seen) return Promise.resolve(seen);
            return new Promise((ok, fail) => {
              const timer = setTimeout(() => {
                waiters.splice(waiters.indexOf(waiter), 1);
                fail(new Error(`no matching event within ${timeoutMs} ms; got ${JSON.stringify(events)}`));
              }, timeoutMs);
              const waiter = {
                match,
                from,
                resolve: (e: SseEvent) => {
                  clearTimeout(timer);
                  ok(e);
                },
              };
              waiters.push(waiter);
            });
          },
          close() {
            req.destroy();
          },
        });
      },
    );
    req.on('error', (err) => reject(err));
    req.end();
  });
}

export const messageContent = (e: SseEvent) => (e.data as { message?: { content?: string } }).message?.content;
