import { randomBytes } from 'node:crypto';

/**
 * Opaque, unguessable, time-sortable identifiers (DECISIONS: Conventions): a type prefix, then
 * 10 characters of millisecond time and 16 characters (80 bits) of randomness in lowercase
 * Crockford base32, like a ULID. Within one millisecond the random part is incremented so ids made
 * by one process sort in creation order.
 */
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
export const ID_BODY_PATTERN = '[0-9a-hjkmnp-tv-z]{26}';

export type IdPrefix = 'ws' | 'conv' | 'msg' | 'med' | 'key' | 'whk' | 'evt' | 'att' | 'vis';

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

function freshRandom(): number[] {
  const bytes = randomBytes(16);
  return Array.from(bytes, (b) => b % 32);
}

function increment(digits: number[]): number[] {
  const next = digits.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i] < 31) {
      next[i]++;
      return next;
    }
    next[i] = 0;
  }
  return freshRandom(); // overflow of 80 bits within one ms: practically impossible
}

export function ulidBody(now = Date.now()): string {
  if (now === lastTime) {
    lastRandom = increment(lastRandom);
  } else {
    lastTime = now;
    lastRandom = freshRandom();
  }
  return encodeTime(now) + lastRandom.map((d) => ALPHABET[d]).join('');
}

export function newId(prefix: IdPrefix, now = Date.now()): string {
  return `${prefix}_${ulidBody(now)}`;
}

export function isId(prefix: IdPrefix, value: unknown): value is string {
  return typeof value === 'string' && new RegExp(`^${prefix}_${ID_BODY_PATTERN}$`).test(value);
}
