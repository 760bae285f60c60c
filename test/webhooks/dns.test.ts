import dgram from 'node:dgram';
import dns from 'node:dns';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { Harness } from '../helpers/harness';
import { within } from '../helpers/wait';
import { createDnsResolver, resolveChecked, Resolver } from '../../server/webhooks/ssrf';
import { postOnce } from '../../server/webhooks/transport';
import { attemptsOf, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks, workerPool, deliveryHarness } from './helpers';

/**
 * Name resolution of event addresses runs on c-ares (the event loop), not on getaddrinfo in
 * libuv's 4-thread pool, and every lookup ends after its time-out. The DNS servers here are UDP
 * sockets on 127.0.0.1: a black hole that reads queries and never answers, and a tiny server with
 * fixed records. getaddrinfo follows /etc/resolv.conf, which a test cannot point at them; so the
 * thread pool is shown another way: it is filled with file opens that block (FIFOs without a
 * writer), exactly as black-holed getaddrinfo calls would fill it, and deliveries must still go out.
 */
let receiver: Receiver;
let h: Harness;
const workers = workerPool(() => h);
const cleanups: (() => void | Promise<void>)[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, {
    timeoutMs: 10_000, // longer than every DNS time-out here: the DNS deadline must end the attempt
    delaysMs: [60_000, 60_000], // no retry within a test
    onEvents: () => workers.wake(),
  });
});
afterEach(async () => {
  await workers.stopAll();
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => {
  await h.close();
  await receiver.close();
});

/** A DNS server that reads every query and never answers (a black-holed zone). */
async function blackHoleDns() {
  const socket = dgram.createSocket('udp4');
  let queries = 0;
  socket.on('message', () => queries++);
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => socket.close(() => resolve())));
  return { server: `127.0.0.1:${socket.address().port}`, queries: () => queries };
}

/** IPv6 text to its 16 bytes (enough for the literals used here). */
function v6Bytes(ip: string): Buffer {
  const [head, tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** A DNS server with fixed A and AAAA records; other names get NXDOMAIN. */
async function stubDns(zone: Record<string, { A?: string[]; AAAA?: string[] }>) {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (query, peer) => {
    let offset = 12;
    const labels: string[] = [];
    while (query[offset] !== 0) {
      labels.push(query.subarray(offset + 1, offset + 1 + query[offset]).toString('ascii'));
      offset += query[offset] + 1;
    }
    const questionEnd = offset + 5;
    const type = query.readUInt16BE(offset + 1);
    const records = zone[labels.join('.').toLowerCase()];
    const rdata = !records
      ? []
      : type === 1
        ? (records.A ?? []).map((a) => Buffer.from(a.split('.').map(Number)))
        : type === 28
          ? (records.AAAA ?? []).map(v6Bytes)
          : [];
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8180 | (records ? 0 : 3), 2); // answer, recursion available; NXDOMAIN when unknown
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(rdata.length, 6);
    const answers = rdata.map((data) => {
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question
      rr.writeUInt16BE(type, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(data.length, 10);
      return Buffer.concat([rr, data]);
    });
    socket.send(Buffer.concat([header, query.subarray(12, questionEnd), ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => socket.close(() => resolve())));
  return { server: `127.0.0.1:${socket.address().port}` };
}

/**
 * Fills libuv's thread pool: one blocking open(2) of a FIFO without a writer per thread. Returns
 * `release`, which gives each FIFO a writer so the opens return and the threads are free again.
 */
function holdThreadPool() {
  const size = Number(process.env.UV_THREADPOOL_SIZE || 4);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-'));
  const fifos = Array.from({ length: size }, (_, i) => path.join(dir, `fifo-${i}`));
  for (const f of fifos) execFileSync('mkfifo', [f]);
  const opens = fifos.map((f) => fs.promises.open(f, 'r'));
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    for (const f of fifos) {
      // A reader is waiting in open(2), so a non-blocking writer's open succeeds and wakes it.
      await waitFor(`a reader on ${f}`, () => {
        try {
          fs.closeSync(fs.openSync(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
          return true;
        } catch {
          return false;
        }
      });
    }
    for (const handle of await Promise.all(opens)) await handle.close();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  cleanups.push(release);
  // The proof that the pool stays full: a file read queued behind the opens, checked at the end.
  let readDone = false;
  const read = fs.promises.readFile(__filename).then(() => void (readDone = true));
  return { release, readDone: () => readDone, read };
}

/** Saves a site's address without asking any DNS (the name is made up; the worker resolves it later). */
const saveAddress = (siteId: string, url: string) =>
  webhooks(h, { allowPrivateNetworks: false, resolve: async () => [{ ip: '93.184.215.14', family: 4 }] }).setEndpoint(siteId, url, 'message.created');

test('a black-holed DNS zone ends the attempt with "dns timeout" within the configured time', async () => {
  const hole = await blackHoleDns();
  const resolve = createDnsResolver({ timeoutMs: 500, servers: [hole.server] });
  const started = Date.now();
  // Two of the service's timers race: the DNS time-out (500 ms) and the attempt's own (2,000 ms),
  // both started at the attempt's start. Expired timers run in the order they fall due however busy
  // the machine is, so the error tells which one ended the attempt: a DNS wait not bounded by its
  // configured time (c-ares' retries, or the 5 s default) ends as 'timeout after 2000 ms'.
  const result = await within(
    30_000, // only turns a hang into a named failure
    'the attempt',
    postOnce('https://hooks.blackholed.test/in', Buffer.from('{}'), {}, { timeoutMs: 2000, allowPrivate: false, resolve }),
  );
  expect(result).toEqual({ status: null, error: 'dns timeout', response: null });
  expect(hole.queries()).toBeGreaterThanOrEqual(2); // A and AAAA were asked
  // It did wait for DNS (a timer never fires early; c-ares' two tries fill about the whole 500 ms).
  expect(Date.now() - started).toBeGreaterThanOrEqual(250);

  // Saving such an address is refused after the same time, not left hanging.
  const service = webhooks(h, { allowPrivateNetworks: false, resolve });
  await expect(service.setEndpoint(h.site.id, 'https://hooks.blackholed.test/in')).rejects.toThrow(/does not resolve \(ETIMEOUT\)/);
});

test('names are asked of DNS directly: both families, checked and pinned; an unknown name is "name not resolved"', async () => {
  const stub = await stubDns({
    'public.example.test': { A: ['93.184.215.14'], AAAA: ['2606:2800:21f:cb07:6820:80da:af6b:8b2c'] },
    'sneaky.example.test': { A: ['93.184.215.14'], AAAA: ['::1'] },
    'v6only.example.test': { AAAA: ['2606:4700:4700::1111'] },
  });
  const resolve = createDnsResolver({ timeoutMs: 2000, servers: [stub.server] });
  expect(await resolveChecked('public.example.test', { allowPrivate: false, resolve })).toEqual([
    { ip: '93.184.215.14', family: 4 },
    { ip: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
  ]);
  expect(await resolveChecked('v6only.example.test', { allowPrivate: false, resolve })).toEqual([{ ip: '2606:4700:4700::1111', family: 6 }]);
  // The private-range rules are unchanged: one private answer in either family refuses the name.
  await expect(resolveChecked('sneaky.example.test', { allowPrivate: false, resolve })).rejects.toThrow(/loopback, private/);
  const missing = await postOnce('https://missing.example.test/in', Buffer.from('{}'), {}, { timeoutMs: 5000, allowPrivate: false, resolve });
  expect(missing).toEqual({ status: null, error: 'name not resolved', response: null });
});

test('localhost and IP literals need no DNS at all', async () => {
  const never: Resolver = async (name) => {
    throw new Error(`asked DNS for ${name}`);
  };
  expect(await resolveChecked('localhost', { allowPrivate: true, resolve: never })).toEqual([{ ip: '127.0.0.1', family: 4 }]);
  expect(await resolveChecked('api.localhost.', { allowPrivate: true, resolve: never })).toEqual([{ ip: '127.0.0.1', family: 4 }]);
  expect(await resolveChecked('::1', { allowPrivate: true, resolve: never })).toEqual([{ ip: '::1', family: 6 }]);
  expect(await resolveChecked('203.0.113.9', { allowPrivate: true, resolve: never })).toEqual([{ ip: '203.0.113.9', family: 4 }]);
  await expect(resolveChecked('localhost', { allowPrivate: false, resolve: never })).rejects.toThrow(/loopback/);
});

test("with libuv's thread pool full, addresses are still checked and deliveries still go out (no dns.lookup)", async () => {
  const lookup = jest.spyOn(dns, 'lookup');
  const promisesLookup = jest.spyOn(dns.promises, 'lookup');
  cleanups.push(() => {
    lookup.mockRestore();
    promisesLookup.mockRestore();
  });
  const stub = await stubDns({ 'hooks.example.test': { A: ['93.184.215.14'] } });
  const site = await h.newSite('pool-full');

  const pool = holdThreadPool();
  // Saving an address, and a name asked of DNS, with every pool thread taken.
  await within(3000, 'saving a localhost address', webhooks(h).setEndpoint(site.id, receiver.url('/pool-full'), 'message.created'));
  const resolve = createDnsResolver({ timeoutMs: 2000, servers: [stub.server] });
  expect(await within(3000, 'resolving through c-ares', resolve('hooks.example.test'))).toEqual([{ ip: '93.184.215.14', family: 4 }]);
  // A worker with the default resolver delivers to localhost.
  workers.start();
  await h.visitorSay(site.id, 'v', 'hello');
  const [eventId] = await eventIdsOf(h, site.id, 'message.created');
  await waitFor('the delivery while the pool is full', async () => (await deliveryOf(h, eventId)).status === 'delivered', 5000);
  expect(receiver.at('/pool-full')).toHaveLength(1);
  // The pool really was full all along: the file read queued behind it has not run yet.
  expect(pool.readDone()).toBe(false);
  // dns.lookup of an IP literal (dgram and listen do that) answers at once without getaddrinfo;
  // a name would have gone to the pool.
  const names = [...lookup.mock.calls, ...promisesLookup.mock.calls].map(([host]) => host).filter((host) => net.isIP(host) === 0);
  expect(names).toEqual([]);

  await pool.release();
  await within(3000, 'the queued file read', pool.read);
});

test('while ten lookups hang on a black-holed zone, file reads and another site’s deliveries go on', async () => {
  const DNS_TIMEOUT_MS = 3000;
  const hole = await blackHoleDns();
  const slow = await h.newSite('black-holed');
  await saveAddress(slow.id, 'https://hooks.blackholed.test/in');
  for (let i = 0; i < 10; i++) await h.visitorSay(slow.id, `v${i}`, `message ${i}`);
  const slowIds = await eventIdsOf(h, slow.id, 'message.created');
  expect(slowIds).toHaveLength(10);
  const fast = await h.newSite('healthy');
  await webhooks(h).setEndpoint(fast.id, receiver.url('/healthy'), 'message.created');

  workers.start({}, { resolve: createDnsResolver({ timeoutMs: DNS_TIMEOUT_MS, servers: [hole.server] }), concurrency: 16, perEndpoint: 10 });
  await waitFor('ten lookups in flight', async () => hole.queries() >= 20);
  const hanging = Date.now();
  const logged = async () => Number((await h.runtime.db('delivery_attempts').whereIn('event_id', slowIds).count({ n: '*' }).first())?.n);

  await within(1000, 'a file read', fs.promises.readFile(__filename));
  await h.visitorSay(fast.id, 'v', 'hello');
  const [fastId] = await eventIdsOf(h, fast.id, 'message.created');
  await waitFor('the healthy site’s delivery', async () => (await deliveryOf(h, fastId)).status === 'delivered', 5000);
  const healthyAfter = Date.now() - hanging;
  expect(await logged()).toBe(0); // every lookup of the black-holed site was still hanging

  await waitFor('the black-holed attempts to end', async () => (await logged()) === 10, DNS_TIMEOUT_MS + 5000);
  for (const id of slowIds) {
    const [attempt] = await attemptsOf(h, id);
    expect(attempt).toMatchObject({ attempt: 1, status_code: null, error: 'dns timeout' });
    // c-ares may give up a little before the deadline; never after it.
    expect(Number(attempt.duration_ms)).toBeGreaterThanOrEqual(DNS_TIMEOUT_MS / 2);
    expect(Number(attempt.duration_ms)).toBeLessThan(DNS_TIMEOUT_MS + 1000);
    expect(await deliveryOf(h, id)).toMatchObject({ status: 'pending', attempts: 1 }); // retried later, like any time-out
  }
  process.stdout.write(`healthy delivery done ${healthyAfter} ms into 10 hanging lookups; black-holed attempts ended within ${DNS_TIMEOUT_MS} ms\n`);
});
