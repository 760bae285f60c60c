/**
 * The worker's delivery transport. One secure context, keep-alive connections per checked set
 * of resolved IPs (a changed DNS answer never reuses a connection to the old IP), the
 * attempt's time-out, the reused-connection reset rule, trusted CAs, and bounded agents.
 * Receivers are local HTTPS servers; names are answered by a fake DNS.
 */
import https from 'node:https';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { createDeliveryTransport, DeliveryTransport, DRAIN_LIMIT_BYTES, TransportOptions } from '../../server/webhooks/transport';
import type { Resolver } from '../../server/webhooks/ssrf';
import { freePort } from '../helpers/spawn';
import { waitFor, within } from '../helpers/wait';

type Handler = (req: IncomingMessage, res: ServerResponse, served: number) => void;
const ok: Handler = (_req, res) => res.end('ok');

/** A certificate for `localhost`, any `*.hooks.test` name, 127.0.0.1 and 127.0.0.2. */
async function receiverCert(): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: 'hooks.test' }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 2, value: '*.hooks.test' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '127.0.0.2' },
        ],
      },
    ],
  } as never);
  return { cert: pems.cert, key: pems.private };
}

interface TestServer {
  port: number;
  /** TCP connections accepted, TLS handshakes finished, connections open now. */
  connections: number;
  handshakes: number;
  open: number;
  servernames: (string | false)[];
  requests: { path: string; localAddress: string }[];
  handler: Handler;
  close(): Promise<void>;
}

async function startServer(pair: { cert: string; key: string }, host = '127.0.0.1', port = 0): Promise<TestServer> {
  const served = new WeakMap<net.Socket, number>();
  const state: TestServer = {
    port: 0,
    connections: 0,
    handshakes: 0,
    open: 0,
    servernames: [],
    requests: [],
    handler: ok,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = https.createServer({ cert: pair.cert, key: pair.key }, (req, res) => {
    const n = (served.get(req.socket) ?? 0) + 1;
    served.set(req.socket, n);
    req.resume();
    req.on('end', () => {
      state.requests.push({ path: req.url ?? '/', localAddress: req.socket.localAddress ?? '' });
      state.handler(req, res, n);
    });
  });
  server.on('connection', (socket: net.Socket) => {
    state.connections++;
    state.open++;
    socket.on('close', () => state.open--);
  });
  // `servername` (the SNI the client sent) is set by Node on server sockets but missing from @types/node.
  server.on('secureConnection', (socket: TLSSocket & { servername?: string | false }) => {
    state.handshakes++;
    state.servernames.push(socket.servername ?? false);
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

let pair: { cert: string; key: string };
let server: TestServer;
const transports: DeliveryTransport[] = [];

function transport(extra: Partial<TransportOptions> = {}): DeliveryTransport {
  const t = createDeliveryTransport({ timeoutMs: 3000, allowPrivate: true, ca: [pair.cert], ...extra });
  transports.push(t);
  return t;
}
const post = (t: DeliveryTransport, url: string) => t.post(url, Buffer.from('{"id":"message.created:1"}'), { 'Content-Type': 'application/json' });
/** A fake DNS that answers every name with `answer.current`. */
const dnsAnswering =
  (answer: { current: string[] }): Resolver =>
  async () =>
    answer.current.map((ip) => ({ ip, family: 4 as const }));

beforeAll(async () => {
  pair = await receiverCert();
  server = await startServer(pair);
});
beforeEach(() => {
  server.handler = ok;
});
afterEach(() => {
  for (const t of transports.splice(0)) t.close();
});
afterAll(() => server.close());

describe('connections', () => {
  test('sequential posts to one address share one TLS connection, with the name as SNI', async () => {
    const t = transport();
    const before = server.handshakes;
    for (let i = 0; i < 5; i++) expect(await post(t, `https://localhost:${server.port}/seq`)).toEqual({ status: 200, error: null, response: 'ok' });
    expect(server.handshakes - before).toBe(1);
    expect(server.servernames.at(-1)).toBe('localhost');
  });

  test('a changed DNS answer gets a new connection to the new resolved IP; the old one is reused when the answer returns', async () => {
    // A second receiver on the same port of another loopback IP.
    const other = await startServer(pair, '127.0.0.2', server.port).catch(() => null);
    if (!other) return console.warn('127.0.0.2 cannot be bound here; skipped');
    try {
      const answer = { current: ['127.0.0.1'] };
      const t = transport({ resolve: dnsAnswering(answer) });
      const url = `https://a.hooks.test:${server.port}/rebind`;
      const first = server.handshakes;
      expect((await post(t, url)).status).toBe(200);
      expect((await post(t, url)).status).toBe(200);
      expect(server.handshakes - first).toBe(1);
      expect(server.servernames.at(-1)).toBe('a.hooks.test');

      answer.current = ['127.0.0.2'];
      expect((await post(t, url)).status).toBe(200);
      expect(other.handshakes).toBe(1);
      expect(other.requests.map((r) => r.localAddress)).toEqual(['127.0.0.2']);
      expect(server.handshakes - first).toBe(1);

      answer.current = ['127.0.0.1'];
      expect((await post(t, url)).status).toBe(200);
      expect(server.handshakes - first).toBe(1); // its idle connection, pinned to 127.0.0.1, is used again
      expect(t.agentCount()).toBe(2);
    } finally {
      await other.close();
    }
  });

  test('a blocked address is refused before any connection is opened', async () => {
    const answer = { current: ['127.0.0.1'] };
    const t = transport({ allowPrivate: false, resolve: dnsAnswering(answer) });
    const before = server.connections;
    expect(await post(t, `https://a.hooks.test:${server.port}/blocked`)).toEqual({ status: null, error: 'blocked address', response: null });
    expect(await post(t, `https://localhost:${server.port}/blocked`)).toEqual({ status: null, error: 'blocked address', response: null });
    expect(server.connections).toBe(before);
    expect(t.agentCount()).toBe(0);
  });

  test('redirects are answers, never followed', async () => {
    server.handler = (_req, res) => {
      res.writeHead(302, { Location: `https://localhost:${server.port}/elsewhere` });
      res.end('moved');
    };
    const before = server.requests.length;
    expect(await post(transport(), `https://localhost:${server.port}/moved`)).toEqual({ status: 302, error: null, response: 'moved' });
    expect(server.requests.length - before).toBe(1);
  });

  test('agents stay bounded over many event addresses and are closed once idle', async () => {
    const t = transport({ resolve: dnsAnswering({ current: ['127.0.0.1'] }), maxAgents: 8, keepAliveMs: 300 });
    const openBefore = server.open;
    for (let i = 0; i < 60; i++) {
      expect((await post(t, `https://h${i}.hooks.test:${server.port}/many`)).status).toBe(200);
      expect(t.agentCount()).toBeLessThanOrEqual(8);
    }
    expect(server.open - openBefore).toBeLessThanOrEqual(8); // evicted agents closed their connections
    await waitFor('idle agents to be closed', () => t.agentCount() === 0 && server.open <= openBefore, 5000);
  });
});

describe('answers', () => {
  test('a 2 KiB answer is excerpted to 1 KiB and read to its end, so the connection is reused', async () => {
    server.handler = (_req, res) => res.end('x'.repeat(2048));
    const t = transport();
    const before = server.handshakes;
    for (let i = 0; i < 3; i++)
      expect(await post(t, `https://localhost:${server.port}/long`)).toEqual({ status: 200, error: null, response: 'x'.repeat(1024) });
    expect(server.handshakes - before).toBe(1);
  });

  test('an answer past the drain limit is cut off: excerpt kept, result at once, connection not reused', async () => {
    const huge = Buffer.alloc(DRAIN_LIMIT_BYTES * 16, 'y');
    server.handler = (_req, res) => res.end(huge);
    const t = transport();
    const before = server.handshakes;
    for (let i = 0; i < 2; i++)
      expect(await post(t, `https://localhost:${server.port}/huge`)).toEqual({ status: 200, error: null, response: 'y'.repeat(1024) });
    expect(server.handshakes - before).toBe(2);
  });
});

describe('failures', () => {
  test('the time-out covers the answer, on a fresh and on a reused connection', async () => {
    server.handler = (_req, res, served) => (served === 1 ? res.end('ok') : undefined); // a connection's 2nd request never gets an answer
    const t = transport({ timeoutMs: 400 });
    expect((await post(t, `https://localhost:${server.port}/slow`)).status).toBe(200);
    const started = Date.now();
    // The answer never comes, so only the attempt's 400 ms timer can end it: its error says so. The
    // 30 s bound only turns a time-out that does not cover the answer (a hang) into a named failure.
    expect(await within(30_000, 'the unanswered request', post(t, `https://localhost:${server.port}/slow`))).toEqual({
      status: null,
      error: 'timeout after 400 ms',
      response: null,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(390); // counted from the attempt's start (a timer never fires early)
  });

  test('the time-out covers the TLS handshake', async () => {
    const silent = net.createServer(() => {}); // accepts, never speaks TLS
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const sockets: net.Socket[] = [];
    silent.on('connection', (s) => sockets.push(s));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      // The server never speaks TLS: only the attempt's 300 ms timer can end it (a hang fails at 30 s, named).
      expect(await within(30_000, 'the handshake that never ends', post(transport({ timeoutMs: 300 }), `https://localhost:${port}/`))).toEqual({
        status: null,
        error: 'timeout after 300 ms',
        response: null,
      });
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  test('a reset on a reused connection before any answer is sent once more on a new connection, within the attempt', async () => {
    // The receiver drops each connection at its second request: what a receiver closing an idle
    // keep-alive connection looks like. It did see that request: the replay is the documented price.
    server.handler = (req, res, served) => (served === 2 ? req.socket.destroy() : res.end('ok'));
    const t = transport();
    const url = `https://localhost:${server.port}/stale`;
    expect((await post(t, url)).status).toBe(200);
    const requests = server.requests.length;
    const handshakes = server.handshakes;
    expect(await post(t, url)).toEqual({ status: 200, error: null, response: 'ok' });
    expect(server.requests.length - requests).toBe(2);
    expect(server.handshakes - handshakes).toBe(1);
  });

  test('a reset on a new connection is a failed attempt, and the replay happens at most once', async () => {
    server.handler = (req) => req.socket.destroy();
    const t = transport();
    const url = `https://localhost:${server.port}/reset`;
    let before = server.requests.length;
    expect(await post(t, url)).toEqual({ status: null, error: 'connection reset', response: null });
    expect(server.requests.length - before).toBe(1); // the connection was new: no replay

    server.handler = (req, res, served) => (served === 1 ? res.end('ok') : req.socket.destroy());
    expect((await post(t, url)).status).toBe(200);
    server.handler = (req) => req.socket.destroy();
    before = server.requests.length;
    expect(await post(t, url)).toEqual({ status: null, error: 'connection reset', response: null });
    expect(server.requests.length - before).toBe(2); // the reused connection, then one new one
  });

  test('refused and unresolved names keep their delivery-log texts', async () => {
    const closedPort = await freePort();
    expect(await post(transport(), `https://localhost:${closedPort}/`)).toEqual({ status: null, error: 'connection refused', response: null });
    const nowhere: Resolver = async (name) => {
      throw Object.assign(new Error(`${name} does not resolve`), { code: 'ENOTFOUND' });
    };
    expect(await post(transport({ resolve: nowhere }), 'https://missing.hooks.test/')).toEqual({ status: null, error: 'name not resolved', response: null });
  });
});

describe('trust', () => {
  test('the extra CA is trusted besides the root store; without it, or with another CA, the certificate is rejected', async () => {
    const url = `https://localhost:${server.port}/trust`;
    expect((await post(transport(), url)).status).toBe(200);
    const stranger = await makeSelfSignedCert();
    expect(await post(transport({ ca: [stranger.cert] }), url)).toEqual({ status: null, error: 'certificate rejected', response: null });
    expect(await post(transport({ ca: undefined }), url)).toEqual({ status: null, error: 'certificate rejected', response: null });
  });

  test('the certificate must match the name asked for', async () => {
    const t = transport({ resolve: dnsAnswering({ current: ['127.0.0.1'] }) });
    expect(await post(t, `https://hooks.example.com:${server.port}/`)).toEqual({ status: null, error: 'certificate rejected', response: null });
  });
});
