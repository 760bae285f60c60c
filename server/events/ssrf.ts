import dns from 'node:dns';
import net from 'node:net';

/**
 * The SSRF rules for event addresses (DECISIONS: Events and delivery). A customer chooses the
 * address, so without these rules a delivery could be aimed at our own network: the database, the
 * cloud metadata service, an admin port on localhost. An address is refused when ANY of the
 * addresses its name resolves to is in one of these ranges; the connection is then made to the
 * address that was checked, so a second DNS answer (rebinding) cannot slip in between.
 */
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
function groups(address: string): number[] | null {
  let text = address.toLowerCase();
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
 * 6to4 (2002::/16). Returns 'blocked' for ranges that hide an address we cannot see: local-use
 * NAT64 (64:ff9b:1::/48) and Teredo (2001::/32).
 */
function embeddedV4(address: string): string | 'blocked' | null {
  const g = groups(address);
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
export function isBlockedAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedV4(address);
    if (v4 === 'blocked') return true;
    if (v4) return isBlockedAddress(v4);
    return BLOCKED.check(address, 'ipv6');
  }
  return true;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Name resolution as the operating system does it (hosts file included); replaceable in tests. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => {
  const all = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export class BlockedAddressError extends Error {
  constructor(readonly hostname: string) {
    super(`${hostname} resolves to a loopback, private, link-local or otherwise reserved address`);
  }
}

/** The host part of a URL without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Resolves `hostname` and returns its addresses, all checked. Throws BlockedAddressError when any
 * of them is blocked (unless private networks are allowed), and the resolver's error (ENOTFOUND...)
 * when the name does not resolve.
 */
export async function resolveChecked(hostname: string, opts: { allowPrivate: boolean; resolve?: Resolver }): Promise<ResolvedAddress[]> {
  const family = net.isIP(hostname);
  // RFC 6761: these names are loopback whatever a resolver says.
  if (!opts.allowPrivate && /(^|\.)localhost\.?$/i.test(hostname)) throw new BlockedAddressError(hostname);
  const addresses: ResolvedAddress[] = family ? [{ address: hostname, family: family as 4 | 6 }] : await (opts.resolve ?? systemResolver)(hostname);
  if (addresses.length === 0) throw Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' });
  if (!opts.allowPrivate && addresses.some((a) => isBlockedAddress(a.address))) throw new BlockedAddressError(hostname);
  return addresses;
}
