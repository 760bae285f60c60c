import { randomFillSync } from 'node:crypto';

// Identifiers are opaque, unguessable and time-sortable, with a type prefix: the prefix, then 10
// characters of millisecond time and 16 characters (80 bits) of randomness in lowercase Crockford
// base32, like a ULID (the id patterns of openapi/openapi.yaml, `^conv_[0-9a-hjkmnp-tv-z]{26}$` and
// the like, accept exactly this form). Within one millisecond the random part is incremented, so
// ids made by one process sort in creation order.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * site (the `workspaceKey`), conversation, message, attachment, access key, event address, anonymous
 * visitor; account, its sign-in session, management token, invitation, audit log entry, security log entry;
 * shared reply, internal note, tag
 */
export type IdPrefix =
  | 'ws'
  | 'conv'
  | 'msg'
  | 'med'
  | 'key'
  | 'whk'
  | 'vis'
  | 'usr'
  | 'ses'
  | 'mtk'
  | 'inv'
  | 'aud'
  | 'rpl'
  | 'sec'
  | 'srp'
  | 'note'
  | 'tag'
  | 'eml'
  | 'pwr'
  | 'elk'
  | 'rpn';

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

/** Random bytes drawn from the system 4 KiB at a time, each used once (crypto.randomUUID pools the same way). */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function freshRandom(): number[] {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const digits = new Array<number>(16);
  for (let i = 0; i < 16; i++) digits[i] = pool[poolOffset + i] & 31;
  poolOffset += 16;
  return digits;
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

/** The time-sortable part without a prefix (also used for request ids, upload names and event ids). */
export function ulidBody(now = Date.now()): string {
  if (now === lastTime) {
    lastRandom = increment(lastRandom);
  } else {
    lastTime = now;
    lastRandom = freshRandom();
  }
  return encodeTime(now) + lastRandom.map((d) => ALPHABET[d]).join('');
}

/** A new identifier, `<prefix>_<ulidBody>`; pass the record's creation time as `now` so both sort alike. */
export function newId(prefix: IdPrefix, now = Date.now()): string {
  return `${prefix}_${ulidBody(now)}`;
}
