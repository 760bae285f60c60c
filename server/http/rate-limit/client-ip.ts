import { isIPv4, isIPv6 } from 'node:net';
import { memoised } from '../../platform/memo';

/** Eight 16-bit groups of an IPv6 address that `isIPv6` accepted (embedded IPv4 tail included). */
function ipv6Groups(ip: string): number[] {
  let text = ip;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail[1].split('.').map(Number);
    text = text.slice(0, tail.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::');
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(rest);
  if (rest === undefined) return left;
  return [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The rate-limit bucket of a client IP. An IPv6 client usually holds a whole /64 (one customer, one
 * LAN, privacy addresses rotating inside it), so the /64 is the unit: otherwise one host could pick a
 * fresh IP per request. An IPv4-mapped address (`::ffff:a.b.c.d`, what a
 * dual-stack listener reports for IPv4 clients) is the IPv4 address itself.
 */
export function clientIpBucket(clientIp: string | undefined): string {
  if (!clientIp) return 'ip:unknown';
  return rememberedBucketOf(clientIp);
}

// A client sends many requests from one IP (keep-alive): its bucket is worked out once.
const rememberedBucketOf = memoised(4096, (clientIp: string) => bucketOf(clientIp));

function bucketOf(clientIp: string): string {
  let a = clientIp.trim();
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  if (isIPv4(a)) return `ip:${a}`;
  if (isIPv6(a)) {
    const g = ipv6Groups(a.toLowerCase());
    if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) {
      return `ip:${g[6] >> 8}.${g[6] & 0xff}.${g[7] >> 8}.${g[7] & 0xff}`;
    }
    return `ip:${g
      .slice(0, 4)
      .map((x) => x.toString(16))
      .join(':')}::/64`;
  }
  // Not an IP (a proxy forwarded something odd): still one bucket per distinct value, bounded.
  return `ip:other:${a.slice(0, 64)}`;
}
