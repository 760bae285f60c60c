/**
 * Behind a proxy the client IP comes from X-Forwarded-For, but only from the hops TRUST_PROXY
 * names, so a client cannot pick its own IP and escape the per-client-IP limit on bad keys. IPv6 clients are limited per /64.
 */
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { loadConfig } from '../../server/config';
import { clientIpBucket } from '../../server/http/rate-limit/client-ip';

const BAD_KEY = 'Bearer wck_doesNotExist000000000000000000000000000';

/** A bad-key request as a proxy in front would forward it: whatever the client sent, then the hop it saw. */
const badKey = (h: Harness, forwardedFor?: string) => {
  const r = request(h.app).get('/api/v1/conversations').set('Authorization', BAD_KEY);
  return forwardedFor === undefined ? r : r.set('X-Forwarded-For', forwardedFor);
};

describe('TRUST_PROXY parsing', () => {
  const parse = (value: string | undefined) => loadConfig({ TRUST_PROXY: value } as NodeJS.ProcessEnv).trustProxy;

  test('true is refused at start with what to give instead', () => {
    for (const value of ['true', 'TRUE', ' True ']) {
      expect(() => parse(value)).toThrow(/TRUST_PROXY=true is refused.*hop.*TRUST_PROXY=1.*loopback/s);
    }
  });

  test('a hop count, a list of IPs, subnets and names, or direct', () => {
    expect(parse(undefined)).toBe(false);
    expect(parse('')).toBe(false);
    expect(parse('false')).toBe(false);
    expect(parse('0')).toBe(false);
    expect(parse('1')).toBe(1);
    expect(parse('2')).toBe(2);
    expect(parse('loopback')).toEqual(['loopback']);
    expect(parse('10.0.0.0/8, 172.16.0.0/12,fd00::/8')).toEqual(['10.0.0.0/8', '172.16.0.0/12', 'fd00::/8']);
  });

  test('anything Express would not understand is refused with the reason', () => {
    expect(() => parse('proxy.internal')).toThrow(/TRUST_PROXY .*invalid IP address: proxy.internal/);
    expect(() => parse('10.0.0.0/33')).toThrow(/TRUST_PROXY/);
    expect(() => parse('1000')).toThrow(/TRUST_PROXY/);
  });
});

describe('clientIpBucket', () => {
  test('IPv4 as is; IPv4-mapped IPv6 is its IPv4 form', () => {
    expect(clientIpBucket('198.51.100.7')).toBe('ip:198.51.100.7');
    expect(clientIpBucket('::ffff:198.51.100.7')).toBe('ip:198.51.100.7');
    expect(clientIpBucket('::FFFF:c633:6407')).toBe('ip:198.51.100.7');
    expect(clientIpBucket('0:0:0:0:0:ffff:198.51.100.7')).toBe('ip:198.51.100.7');
  });

  test('IPv6 addresses in one /64 share a bucket, other /64s do not', () => {
    const a = clientIpBucket('2001:db8:1:2::1');
    expect(a).toBe('ip:2001:db8:1:2::/64');
    expect(clientIpBucket('2001:db8:1:2:ffff:ffff:ffff:fffe')).toBe(a);
    expect(clientIpBucket('2001:DB8:0001:0002:a:b:c:d')).toBe(a);
    expect(clientIpBucket('[2001:db8:1:2::9]')).toBe(a);
    expect(clientIpBucket('2001:db8:1:2::1.2.3.4')).toBe(a);
    expect(clientIpBucket('2001:db8:1:3::1')).not.toBe(a);
    expect(clientIpBucket('2001:db8:2:2::1')).not.toBe(a);
    expect(clientIpBucket('fe80::1%eth0')).toBe(clientIpBucket('fe80::2'));
  });

  test('no IP, or something that is not one, still gets a bounded bucket', () => {
    expect(clientIpBucket(undefined)).toBe('ip:unknown');
    expect(clientIpBucket('x'.repeat(500)).length).toBeLessThan(80);
  });
});

describe('per-client-IP limit behind proxies', () => {
  const harnesses: Harness[] = [];
  const harness = async (env: Record<string, string>) => {
    const h = await createHarness({ env });
    harnesses.push(h);
    return h;
  };
  afterAll(async () => {
    for (const h of harnesses) await h.close();
  });

  test('TRUST_PROXY=1: rotating X-Forwarded-For from one client does not escape its budget, nor reach the database', async () => {
    const h = await harness({ TRUST_PROXY: '1', RATE_LIMIT_PER_MINUTE: '10' });
    const lookups = jest.spyOn(h.runtime.services.access, 'authenticate');
    const counts: Record<number, number> = {};
    for (let i = 0; i < 330; i++) {
      // The client forges a fresh IP each time; the one proxy hop appends the IP it saw.
      const res = await badKey(h, `10.${i >> 8}.${i & 255}.1, 203.0.113.9`);
      counts[res.status] = (counts[res.status] ?? 0) + 1;
      if (res.status === 429) expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(counts).toEqual({ 401: 10, 429: 320 });
    expect(lookups).toHaveBeenCalledTimes(10);
    // Another client behind the same proxy has its own budget.
    expect((await badKey(h, '203.0.113.10')).status).toBe(401);
  });

  test('TRUST_PROXY=loopback: the last untrusted hop is the client, whatever the client wrote before it', async () => {
    const h = await harness({ TRUST_PROXY: 'loopback, 10.0.0.0/8', RATE_LIMIT_PER_MINUTE: '3' });
    // supertest connects from loopback (trusted); 10.0.0.5 is a trusted inner proxy; 203.0.113.9 is the client.
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await badKey(h, `198.51.100.${i}, 203.0.113.9, 10.0.0.5`)).status);
    expect(codes).toEqual([401, 401, 401, 429]);
    expect((await badKey(h, '198.51.100.1, 203.0.113.10, 10.0.0.5')).status).toBe(401);
  });

  test('a peer that is not a trusted proxy is the client: its X-Forwarded-For is ignored', async () => {
    const h = await harness({ TRUST_PROXY: '10.0.0.0/8', RATE_LIMIT_PER_MINUTE: '3' });
    const codes = [];
    for (let i = 0; i < 5; i++) codes.push((await badKey(h, `198.51.100.${i}`)).status);
    expect(codes).toEqual([401, 401, 401, 429, 429]);
  });

  test('IPv6 clients share a budget per /64; IPv4-mapped and plain IPv4 are one client', async () => {
    const h = await harness({ TRUST_PROXY: 'loopback', RATE_LIMIT_PER_MINUTE: '2' });
    expect((await badKey(h, '2001:db8:1:2::1')).status).toBe(401);
    expect((await badKey(h, '2001:db8:1:2::2')).status).toBe(401);
    expect((await badKey(h, '2001:db8:1:2:a:b:c:d')).status).toBe(429);
    expect((await badKey(h, '2001:db8:1:3::1')).status).toBe(401);
    expect((await badKey(h, '::ffff:198.51.100.7')).status).toBe(401);
    expect((await badKey(h, '198.51.100.7')).status).toBe(401);
    expect((await badKey(h, '198.51.100.7')).status).toBe(429);
  });

  test('a valid key from an exhausted client IP is refused without a lookup; from another client IP it works', async () => {
    const h = await harness({ TRUST_PROXY: 'loopback', RATE_LIMIT_PER_MINUTE: '2' });
    expect((await badKey(h, '203.0.113.9')).status).toBe(401);
    expect((await badKey(h, '203.0.113.9')).status).toBe(401);
    const lookups = jest.spyOn(h.runtime.services.access, 'authenticate');
    const good = () => request(h.app).get('/api/v1/conversations').set(bearer(h.site.key));
    // 200 here would tell a guesser which of its keys are real.
    expect((await good().set('X-Forwarded-For', '203.0.113.9')).status).toBe(429);
    expect(lookups).not.toHaveBeenCalled();
    expect((await good().set('X-Forwarded-For', '203.0.113.10')).status).toBe(200);
  });
});
