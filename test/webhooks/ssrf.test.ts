import fs from 'node:fs';
import type { Harness } from '../helpers/harness';
import { isBlockedIp, Resolver } from '../../server/webhooks/ssrf';
import { postOnce } from '../../server/webhooks/transport';
import { attemptsOf, deliveryHarness, deliveryOf, eventIdsOf, Receiver, startReceiver, waitFor, webhooks, workerPool } from './helpers';

/** Addresses are refused when saved and again at every connect (docs/operations.md, Event receivers). */
let receiver: Receiver;
let h: Harness;
const workers = workerPool(() => h);

beforeAll(async () => {
  receiver = await startReceiver();
  h = await deliveryHarness(receiver, { timeoutMs: 2000, delaysMs: [100, 100], allowPrivateNetworks: false, onEvents: () => workers.wake() });
});
afterEach(() => workers.stopAll());
afterAll(async () => {
  await h.close();
  await receiver.close();
});

/** A fake DNS: names map to fixed answers, everything else does not resolve. */
function fakeDns(table: Record<string, string[]>): Resolver {
  return async (name) => {
    const answers = table[name];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return answers.map((ip) => ({ ip, family: ip.includes(':') ? 6 : 4 }));
  };
}

describe('IP ranges', () => {
  test.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.0.5', 'link-local'],
    ['169.254.169.254', 'cloud metadata'],
    ['100.64.0.1', 'CGNAT'],
    ['100.127.255.254', 'CGNAT'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network'],
    ['224.0.0.251', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fc00::1', 'unique local'],
    ['fd12:3456::1', 'unique local'],
    ['fd00:ec2::254', 'cloud metadata'],
    ['fe80::1', 'link-local'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped metadata (hex form)'],
    ['64:ff9b::7f00:1', 'NAT64 of loopback'],
    ['::127.0.0.1', 'IPv4-compatible loopback'],
    ['::a00:1', 'IPv4-compatible private (hex form)'],
    ['::ffff:0:7f00:1', 'IPv4-translated loopback'],
    ['64:ff9b:1::7f00:1', 'local-use NAT64'],
    ['2002:7f00:1::1', '6to4 of loopback'],
    ['2002:a9fe:a9fe::1', '6to4 of cloud metadata'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['not-an-ip', 'not an IP'],
  ])('%s (%s) is blocked', (ip) => {
    expect(isBlockedIp(ip)).toBe(true);
  });

  test.each([
    ['93.184.215.14'],
    ['8.8.8.8'],
    ['1.1.1.1'],
    ['172.32.0.1'],
    ['100.128.0.1'],
    ['2606:4700:4700::1111'],
    ['::ffff:8.8.8.8'],
    ['2002:808:808::1'],
    ['64:ff9b::808:808'],
  ])('%s is public', (ip) => {
    expect(isBlockedIp(ip)).toBe(false);
  });
});

describe('when an address is saved', () => {
  const dns = fakeDns({
    'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'sneaky.example.com': ['127.0.0.1'],
    'mixed.example.com': ['93.184.215.14', '10.0.0.7'],
    'metadata.example.com': ['169.254.169.254'],
  });
  const strict = () => webhooks(h, { allowPrivateNetworks: false, resolve: dns });

  test('http:// and other schemes are refused', async () => {
    await expect(strict().setEndpoint(h.site.id, 'http://hooks.example.com/in')).rejects.toThrow(/https:\/\//);
    await expect(strict().setEndpoint(h.site.id, 'ftp://hooks.example.com/in')).rejects.toThrow(/https:\/\//);
    await expect(strict().setEndpoint(h.site.id, 'not a url')).rejects.toThrow(/not a URL/);
  });

  test('credentials in the address are refused', async () => {
    await expect(strict().setEndpoint(h.site.id, 'https://user:pw@hooks.example.com/in')).rejects.toThrow(/user name or password/);
  });

  test.each([
    'https://localhost/in',
    'https://127.0.0.1/in',
    'https://2130706433/in', // 127.0.0.1 written as a number
    'https://[::1]/in',
    'https://[::ffff:127.0.0.1]/in',
    'https://10.0.0.1/in',
    'https://169.254.169.254/latest/meta-data',
    'https://[fd00:ec2::254]/',
    'https://100.64.0.1/',
    'https://sneaky.example.com/in', // a public-looking name that resolves to 127.0.0.1
    'https://mixed.example.com/in', // one public and one private resolved IP: any private one refuses
    'https://metadata.example.com/in',
  ])('%s is refused while private networks are not allowed', async (url) => {
    await expect(strict().setEndpoint(h.site.id, url)).rejects.toThrow(/loopback, private, link-local/);
    expect(await h.runtime.db('webhook_endpoints').where({ site_id: h.site.id }).first()).toBeUndefined();
  });

  test('`localhost` through the system resolver is refused too', async () => {
    const service = webhooks(h, { allowPrivateNetworks: false });
    await expect(service.setEndpoint(h.site.id, receiver.url('/x'))).rejects.toThrow(/localhost resolves to a loopback/);
  });

  test('a name that does not resolve is refused', async () => {
    await expect(strict().setEndpoint(h.site.id, 'https://nowhere.example.com/in')).rejects.toThrow(/does not resolve/);
  });

  test('a public address is accepted, and the events default to all three', async () => {
    const site = await h.newSite('public');
    const saved = await strict().setEndpoint(site.id, 'https://hooks.example.com/in?tenant=7#frag');
    expect(saved).toEqual({
      id: expect.stringMatching(/^whk_[0-9a-z]{26}$/),
      url: 'https://hooks.example.com/in?tenant=7',
      events: ['conversation.started', 'message.created', 'conversation.closed'],
      secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{43}$/),
    });
    // Saving again changes the address and events but keeps the id and the secret (not shown again).
    const again = await strict().setEndpoint(site.id, 'https://hooks.example.com/v2', 'message.created');
    expect(again).toEqual({ id: saved.id, url: 'https://hooks.example.com/v2', events: ['message.created'], secret: null });
  });

  test('unknown event names are refused', async () => {
    await expect(strict().setEndpoint(h.site.id, 'https://hooks.example.com/in', 'message.created,message.deleted')).rejects.toThrow(
      /unknown: message.deleted/,
    );
  });

  test('with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, localhost is accepted (development and tests)', async () => {
    const site = await h.newSite('dev');
    const saved = await webhooks(h, { allowPrivateNetworks: true }).setEndpoint(site.id, receiver.url('/dev'));
    expect(saved.url).toBe(receiver.url('/dev'));
  });
});

describe('at every connect', () => {
  test('an address saved while private networks were allowed is refused by a worker that does not allow them', async () => {
    const site = await h.newSite('rebound');
    await webhooks(h, { allowPrivateNetworks: true }).setEndpoint(site.id, receiver.url('/rebound'), 'message.created');
    workers.start({ webhookAllowPrivateNetworks: false });
    await h.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    await waitFor('the delivery to end', async () => (await deliveryOf(h, id)).status !== 'pending');
    // Refused by policy: not retried, nothing reached the receiver.
    expect(await deliveryOf(h, id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect((await attemptsOf(h, id)).map((a) => [a.attempt, a.status_code, a.error])).toEqual([[1, null, 'blocked address']]);
    expect(receiver.at('/rebound')).toHaveLength(0);
  });

  test('a name whose DNS answer changes to a private IP after it was saved is refused (DNS rebinding)', async () => {
    let answer = '93.184.215.14';
    const dns: Resolver = async () => [{ ip: answer, family: 4 }];
    const site = await h.newSite('rebinding');
    const service = webhooks(h, { allowPrivateNetworks: false, resolve: dns });
    await service.setEndpoint(site.id, 'https://rebind.example.com/in', 'message.created');
    answer = '127.0.0.1';
    workers.start({ webhookAllowPrivateNetworks: false }, { resolve: dns });
    await h.visitorSay(site.id, 'v', 'hi');
    const [id] = await eventIdsOf(h, site.id, 'message.created');
    await waitFor('the delivery to end', async () => (await deliveryOf(h, id)).status !== 'pending');
    expect((await attemptsOf(h, id)).map((a) => a.error)).toEqual(['blocked address']);
  });

  test('the connection goes to the resolved IP that was checked, with the name kept for TLS', async () => {
    // The name resolves (in our fake DNS) to the receiver's 127.0.0.1; the certificate is for
    // `localhost`, which is the name we asked for, so TLS verifies.
    const { port } = new URL(receiver.url('/'));
    const dns: Resolver = async (name) => (name === 'localhost' ? [{ ip: '127.0.0.1', family: 4 }] : []);
    const result = await postOnce(
      `https://localhost:${port}/pinned`,
      Buffer.from('{}'),
      { 'Content-Type': 'application/json' },
      {
        timeoutMs: 2000,
        allowPrivate: true,
        ca: [fs.readFileSync(receiver.caFile, 'utf8')],
        resolve: dns,
      },
    );
    expect(result).toEqual({ status: 200, error: null, response: 'ok' });
    expect(receiver.at('/pinned')).toHaveLength(1);
    // The same with private networks not allowed never opens a connection.
    const blocked = await postOnce(`https://localhost:${port}/pinned`, Buffer.from('{}'), {}, { timeoutMs: 2000, allowPrivate: false, resolve: dns });
    expect(blocked).toEqual({ status: null, error: 'blocked address', response: null });
    expect(receiver.at('/pinned')).toHaveLength(1);
  });
});
