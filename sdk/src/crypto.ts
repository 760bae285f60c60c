/**
 * Web Crypto only, so the SDK runs on Node.js, Deno, Bun, Cloudflare Workers and other edge
 * runtimes alike. Node 18 does not expose `globalThis.crypto` by default; there the SDK takes
 * `webcrypto` from `node:crypto`, loaded lazily and only when the global is missing.
 */

async function getCrypto(): Promise<Crypto> {
  const global = (globalThis as { crypto?: Crypto }).crypto;
  if (global?.subtle) return global;
  // A variable specifier keeps bundlers for edge runtimes from trying to include node:crypto. The
  // module system caches the import, so the SDK keeps no cache of its own.
  const specifier = 'node:crypto';
  const { webcrypto } = (await import(/* webpackIgnore: true */ specifier)) as { webcrypto?: Crypto };
  if (!webcrypto?.subtle) throw new Error('Web Crypto (crypto.subtle) is not available in this runtime.');
  return webcrypto;
}

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** HMAC-SHA256 of `data` under the UTF-8 bytes of `secret`. */
export async function hmacSha256(secret: string, data: Uint8Array): Promise<Uint8Array> {
  const c = await getCrypto();
  // Importing the key per signature costs microseconds; a cache would keep secrets in module state.
  const key = await c.subtle.importKey('raw', utf8(secret) as BufferSource, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await c.subtle.sign('HMAC', key, data as BufferSource));
}

export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

/** Decodes lowercase or uppercase hex; null when it is not hex of even length. */
export function fromHex(hex: string): Uint8Array | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Compares in time that depends only on the length, never on where the bytes differ. */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ (b[i % (b.length || 1)] ?? 0);
  return diff === 0;
}

export async function randomUUID(): Promise<string> {
  const c = await getCrypto();
  if (typeof c.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = toHex(b);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
