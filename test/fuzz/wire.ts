import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { makeSelfSignedCert } from '../../server/platform/tls';

/**
 * How the body goes out. `whole`: with Content-Length. `chunked`: Transfer-Encoding: chunked in a
 * few pieces. `abort`: Content-Length of the whole body, only the first `sendBytes` of it sent,
 * then the connection is cut (a client that drops mid-upload); no answer is expected.
 */
export type Delivery = { kind: 'whole' } | { kind: 'chunked'; pieces: number } | { kind: 'abort'; sendBytes: number };

/** One request exactly as it goes on the wire (header values are latin1 strings: one char per byte). */
export interface WireRequest {
  method: string;
  /** Request target: path and query, already percent-encoded (or deliberately not). */
  target: string;
  headers: [string, string][];
  body: Buffer | null;
  delivery: Delivery;
}

export interface WireAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** For an event stream, what arrived of it before the client hung up (see EVENT_STREAM_WAIT_MS). */
  body: Buffer;
}

export type WireOutcome =
  | { kind: 'answer'; answer: WireAnswer; ms: number }
  | { kind: 'dropped'; error: string; ms: number }
  | { kind: 'aborted'; serverSocketClosed: boolean; ms: number };

export interface FuzzServer {
  url: string;
  send(req: WireRequest): Promise<WireOutcome>;
  /** A plain GET (for the before/after checks). */
  get(target: string, headers?: Record<string, string>): Promise<WireAnswer>;
  close(): Promise<void>;
}

/** Longest a single request may take before it counts as a missing answer. */
const ANSWER_TIMEOUT_MS = 15_000;
/**
 * An event stream never ends: the client keeps its start (up to the first blank line after an
 * `event:` line, or what came within this time) and hangs up, as a closing browser tab does.
 */
const EVENT_STREAM_WAIT_MS = 2_000;

/**
 * The app behind a real HTTPS listener (like listenHttps in the harness), plus a keep-alive client
 * built on node:https that sends what it is given: any method token, any header bytes the HTTP
 * grammar allows, any body bytes, chunked or cut off. The server's sockets are tracked by the
 * client's port, so a test can wait until the server has seen an aborted connection close.
 */
export async function startFuzzServer(app: Express): Promise<FuzzServer> {
  const tls = await makeSelfSignedCert();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, app);
  // The production listener's idle time-out (HTTP_KEEPALIVE_TIMEOUT_MS, 65 s), not Node's 5 s: with
  // 5 s a pooled socket reused just as the server closed it read ECONNRESET before the request was
  // seen (HTTP/1.1's idle-close race, which clients retry), after pauses such as the seeding.
  server.keepAliveTimeout = 65_000;
  // Client port -> resolves when the server's side of that connection has closed. The server may
  // see the handshake end after the client does, so the entry is made on first ask.
  interface ServerSide {
    accepted: Promise<void>;
    closed: Promise<void>;
    accept(): void;
    close(): void;
  }
  const serverSides = new Map<number, ServerSide>();
  const serverSide = (port: number): ServerSide => {
    let entry = serverSides.get(port);
    if (!entry) {
      let accept!: () => void;
      let close!: () => void;
      const accepted = new Promise<void>((r) => (accept = r));
      const closed = new Promise<void>((r) => (close = r));
      entry = { accepted, closed, accept, close };
      serverSides.set(port, entry);
    }
    return entry;
  };
  server.on('secureConnection', (socket: TLSSocket) => {
    const port = socket.remotePort;
    if (port === undefined) return;
    const entry = serverSide(port);
    entry.accept();
    socket.once('close', () => {
      entry.close();
      serverSides.delete(port);
    });
  });
  const within = <T>(promise: Promise<T>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([promise.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]).finally(() => clearTimeout(timer));
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new https.Agent({ keepAlive: true, maxSockets: 8, ca: tls.cert, servername: 'localhost' });

  function send(req: WireRequest): Promise<WireOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
      let settled = false;
      let cutting = false; // our own abort: the client's "socket hang up" is expected then
      const finish = (outcome: WireOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const headers: [string, string][] = [...req.headers];
      const body = req.body ?? Buffer.alloc(0);
      const hasHeader = (name: string) => headers.some(([n]) => n.toLowerCase() === name);
      // With a raw header list node:https adds no Host of its own.
      if (!hasHeader('host')) headers.unshift(['Host', `localhost:${port}`]);
      if (req.delivery.kind === 'chunked') {
        if (!hasHeader('transfer-encoding')) headers.push(['Transfer-Encoding', 'chunked']);
      } else if ((req.body !== null || req.delivery.kind === 'abort') && !hasHeader('content-length')) {
        headers.push(['Content-Length', String(body.length)]);
      }
      // node:https takes a flat [name, value, name, value, ...] list verbatim (duplicates kept).
      const client = https.request({
        host: '127.0.0.1',
        port,
        method: req.method,
        path: req.target,
        headers: headers.flat(),
        agent: req.delivery.kind === 'abort' ? false : agent,
        ca: tls.cert,
        servername: 'localhost',
      });
      const timer = setTimeout(() => {
        client.destroy();
        finish({ kind: 'dropped', error: `no answer within ${ANSWER_TIMEOUT_MS} ms`, ms: elapsed() });
      }, ANSWER_TIMEOUT_MS);
      client.on(
        'error',
        (err) => !cutting && finish({ kind: 'dropped', error: `${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}`.trim(), ms: elapsed() }),
      );
      client.on('response', (res) => {
        const chunks: Buffer[] = [];
        if (/^text\/event-stream/.test(res.headers['content-type'] ?? '')) {
          const hangUp = () => {
            finish({ kind: 'answer', answer: { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }, ms: elapsed() });
            client.destroy();
          };
          const wait = setTimeout(hangUp, EVENT_STREAM_WAIT_MS);
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            if (/(^|\n)event:[^\n]*\n(.*\n)*?\n/.test(Buffer.concat(chunks).toString('utf8'))) {
              clearTimeout(wait);
              hangUp();
            }
          });
          res.on('end', () => {
            clearTimeout(wait);
            hangUp();
          });
          return;
        }
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => finish({ kind: 'dropped', error: `answer cut off: ${err.message}`, ms: elapsed() }));
        res.on('aborted', () => finish({ kind: 'dropped', error: 'answer cut off (aborted)', ms: elapsed() }));
        res.on('end', () => {
          if (!res.complete) return finish({ kind: 'dropped', error: 'answer cut off (incomplete)', ms: elapsed() });
          finish({ kind: 'answer', answer: { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }, ms: elapsed() });
        });
      });

      if (req.delivery.kind === 'abort') {
        const part = body.subarray(0, req.delivery.sendBytes);
        // A fresh connection (agent: false), so the cut never hits a pooled socket.
        client.on('socket', (socket) => {
          socket.once('secureConnect', () => {
            const localPort = (socket as TLSSocket).localPort;
            const side = localPort === undefined ? undefined : serverSide(localPort);
            const cut = async () => {
              if (settled) return; // the server answered (or hung up) before the cut
              // The server must have taken the connection, or it never sees a request to drop.
              if (side) await within(side.accepted, 2_000);
              cutting = true;
              client.destroy();
              // Wait (bounded) for the server to see the connection go, so whatever it does on
              // `close` (spool clean-up, stream destruction) happens inside this case.
              const closed = side ? await within(side.closed, 5_000) : true;
              await new Promise((r) => setImmediate(r));
              await new Promise((r) => setImmediate(r));
              finish({ kind: 'aborted', serverSocketClosed: closed, ms: elapsed() });
            };
            client.flushHeaders();
            if (part.length === 0) return void cut();
            client.write(part, () => void cut());
          });
        });
        return;
      }
      if (req.delivery.kind === 'chunked' && body.length > 0) {
        const pieces = Math.max(1, Math.min(req.delivery.pieces, body.length));
        const size = Math.ceil(body.length / pieces);
        for (let at = 0; at < body.length; at += size) client.write(body.subarray(at, at + size));
        client.end();
      } else {
        client.end(body.length ? body : undefined);
      }
    });
  }

  async function get(target: string, headers: Record<string, string> = {}): Promise<WireAnswer> {
    const outcome = await send({ method: 'GET', target, headers: Object.entries(headers), body: null, delivery: { kind: 'whole' } });
    if (outcome.kind !== 'answer') throw new Error(`GET ${target}: ${outcome.kind === 'dropped' ? outcome.error : 'aborted'}`);
    return outcome.answer;
  }

  return {
    url: `https://localhost:${port}`,
    send,
    get,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
