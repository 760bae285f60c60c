/*
 * The SSRF rules for event addresses (docs/operations.md, Event receivers). A customer chooses the
 * event address, so without these rules a delivery could be aimed at our own network: the database,
 * the cloud metadata service, an admin port on localhost. An event address is refused when ANY of
 * the IPs its host name resolves to is in one of these ranges; the connection is then made to the
 * resolved IP that was checked, so a second DNS answer (rebinding) cannot slip in between.
 */
import dns from 'node:dns';
import net from 'node:net';

const BLOCKED = new net.BlockList();
const V4: [string, number][] = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, 255.255.255.255 broadcast
];
const V6: [string, number][] = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local, cloud metadata fd00:ec2::254
  ['fe80::', 10], // link-local
  ['fec0::', 10], // old site-local
  ['ff00::', 8], // multicast
];
for (const [a, p] of V4) BLOCKED.addSubnet(a, p, 'ipv4');
for (const [a, p] of V6) BLOCKED.addSubnet(a, p, 'ipv6');

/** The eight 16-bit groups of an IPv6 literal (with a dotted IPv4 tail converted). */
function groups(ip: string): number[] | null {
  let text = ip.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const o = dotted[1].split('.').map(Number);
    text = text.slice(0, -dotted[1].length) + `${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail ? tail.split(':') : [];
  const fill = text.includes('::') ? 8 - h.length - t.length : 0;
  const all = [...h, ...Array(fill).fill('0'), ...t].map((g) => parseInt(g, 16));
  return all.length === 8 && all.every((g) => g >= 0 && g <= 0xffff) ? all : null;
}

const v4Of = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');

/**
 * An IPv4 address carried inside an IPv6 one, so the IPv4 rules apply to it: IPv4-compatible
 * (::/96), IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96) and
 * 6to4 (2002::/16). Returns 'blocked' for ranges that hide an IP we cannot see: local-use
 * NAT64 (64:ff9b:1::/48) and Teredo (2001::/32).
 */
function embeddedV4(ip: string): string | 'blocked' | null {
  const g = groups(ip);
  if (!g) return 'blocked';
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeros(6) && !(g[6] === 0 && g[7] <= 1)) return v4Of(g[6], g[7]); // ::a.b.c.d (not :: or ::1)
  if (zeros(5) && g[5] === 0xffff) return v4Of(g[6], g[7]); // ::ffff:a.b.c.d
  if (zeros(4) && g[4] === 0xffff && g[5] === 0) return v4Of(g[6], g[7]); // ::ffff:0:a.b.c.d
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4Of(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'blocked';
  if (g[0] === 0x2002) return v4Of(g[1], g[2]);
  if (g[0] === 0x2001 && g[1] === 0) return 'blocked';
  return null;
}

/** Is this IP literal in a range event deliveries must never reach? Unparseable counts as blocked. */
export function isBlockedIp(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) return BLOCKED.check(ip, 'ipv4');
  if (family === 6) {
    const v4 = embeddedV4(ip);
    if (v4 === 'blocked') return true;
    if (v4) return isBlockedIp(v4);
    return BLOCKED.check(ip, 'ipv6');
  }
  return true;
}

/** One IP an event address's host name resolved to. */
export interface ResolvedIp {
  ip: string;
  family: 4 | 6;
}

/** Name resolution of event addresses; replaceable in tests. */
export type Resolver = (hostname: string) => Promise<ResolvedIp[]>;

/** How long one name may take to resolve (both record types) before the attempt gives up on it. */
export const DNS_TIMEOUT_MS = 5000;

/** A DNS server that did not answer in time; the delivery log says `dns timeout`. */
export class DnsTimeoutError extends Error {
  readonly code = 'ETIMEOUT';
  constructor(
    readonly hostname: string,
    timeoutMs: number,
  ) {
    super(`${hostname}: no DNS answer within ${timeoutMs} ms`);
  }
}

/**
 * A resolver that asks DNS servers directly (c-ares, on the event loop) instead of `dns.lookup`.
 * `dns.lookup` is getaddrinfo on libuv's thread pool (4 threads, shared with file I/O and crypto):
 * a site whose DNS zone is black-holed holds one thread per lookup for the system resolver's whole
 * time-out, so a handful of its deliveries would stall every file read and every other site's
 * deliveries. Here a lookup costs a socket and a timer, and it ends after `timeoutMs` whatever the
 * servers do. The hosts file is not read: an event address must be a name the public DNS knows
 * (`localhost` and IP literals never get here, see resolveChecked). `servers` (host or host:port)
 * replaces the system's /etc/resolv.conf servers.
 */
export function createDnsResolver(opts: { timeoutMs?: number; servers?: string[] } = {}): Resolver {
  const timeoutMs = opts.timeoutMs ?? DNS_TIMEOUT_MS;
  // Two tries, the second with c-ares' doubled wait, fit the budget; the deadline below is what
  // guarantees it, whatever c-ares' back-off does.
  const resolver = new dns.promises.Resolver({ timeout: Math.max(50, Math.floor(timeoutMs / 3)), tries: 2 });
  if (opts.servers) resolver.setServers(opts.servers);
  return async (hostname) => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new DnsTimeoutError(hostname, timeoutMs)), timeoutMs);
    });
    // Both families at once, as getaddrinfo does; a family that fails or has no records is left out
    // (only the IPs returned here are checked, and only they are connected to).
    const lookups = Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    try {
      const [v4, v6] = await Promise.race([lookups, deadline]);
      const resolvedIps: ResolvedIp[] = [
        ...(v4.status === 'fulfilled' ? v4.value.map((ip) => ({ ip, family: 4 as const })) : []),
        ...(v6.status === 'fulfilled' ? v6.value.map((ip) => ({ ip, family: 6 as const })) : []),
      ];
      if (resolvedIps.length > 0) return resolvedIps;
      const codes = [v4, v6].map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'ENODATA'));
      if (codes.includes('ETIMEOUT')) throw new DnsTimeoutError(hostname, timeoutMs);
      // NXDOMAIN, no records, a server that refused or failed: the name does not resolve.
      throw Object.assign(new Error(`${hostname} does not resolve (${codes.join(', ')})`), { code: 'ENOTFOUND' });
    } finally {
      clearTimeout(timer);
    }
  };
}

let defaultResolver: Resolver | undefined;
/** The resolver used when none is given: the system's DNS servers, DNS_TIMEOUT_MS per name. */
export function systemResolver(hostname: string): Promise<ResolvedIp[]> {
  defaultResolver ??= createDnsResolver();
  return defaultResolver(hostname);
}

/** RFC 6761: `localhost` and its subdomains are loopback whatever a resolver says. */
const LOCALHOST = /(^|\.)localhost\.?$/i;
// IPv4 only: with a second IP the connect would race both families (250 ms per try), and a
// busy local receiver listening on 127.0.0.1 alone then fails with ETIMEDOUT. An IPv6-only
// receiver is reachable as https://[::1]:port.
const LOOPBACK: ResolvedIp[] = [{ ip: '127.0.0.1', family: 4 }];

/** An event address whose host name resolves to a blocked IP; the delivery log says `blocked address`. */
export class BlockedIpError extends Error {
  constructor(readonly hostname: string) {
    super(`${hostname} resolves to a loopback, private, link-local or otherwise reserved IP`);
  }
}

/** The host part of a URL without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Resolves `hostname` and returns its resolved IPs, all checked. Throws BlockedIpError when any
 * of them is blocked (unless private networks are allowed), the resolver's error (ENOTFOUND...)
 * when the name does not resolve, and DnsTimeoutError when DNS does not answer in time.
 */
export async function resolveChecked(hostname: string, opts: { allowPrivate: boolean; resolve?: Resolver }): Promise<ResolvedIp[]> {
  const family = net.isIP(hostname);
  if (LOCALHOST.test(hostname)) {
    if (!opts.allowPrivate) throw new BlockedIpError(hostname);
    // Answered here, not by DNS (which does not know it) or the hosts file (which is not read).
    return LOOPBACK.map((a) => ({ ...a }));
  }
  const resolvedIps: ResolvedIp[] = family ? [{ ip: hostname, family: family as 4 | 6 }] : await (opts.resolve ?? systemResolver)(hostname);
  if (resolvedIps.length === 0) throw Object.assign(new Error(`${hostname} has no IP`), { code: 'ENOTFOUND' });
  if (!opts.allowPrivate && resolvedIps.some((r) => isBlockedIp(r.ip))) throw new BlockedIpError(hostname);
  return resolvedIps;
}
