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

/** An IPv4 address carried inside an IPv6 one (NAT64 64:ff9b::/96); BlockList already sees through ::ffff:0:0/96. */
function embeddedV4(address: string): string | null {
  const m = /^64:ff9b::(?:([0-9a-f]{1,4}):([0-9a-f]{1,4})|(\d+\.\d+\.\d+\.\d+))$/i.exec(address);
  if (!m) return null;
  if (m[3]) return m[3];
  const hi = parseInt(m[1], 16);
  const lo = parseInt(m[2], 16);
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/** Is this IP literal in a range event deliveries must never reach? Unparseable counts as blocked. */
export function isBlockedAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedV4(address);
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
