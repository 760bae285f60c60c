import { createHmac } from 'node:crypto';
import { safeEqual } from './crypto';
import { invalid } from './errors';
import { memoised } from './memo';

/** The position a page ends at: the sort key of its last row. */
export interface Position {
  createdAt: number;
  id: string;
}

/**
 * Opaque keyset cursors: `<base64url payload>.<HMAC>`. The payload holds the position and a hash
 * of the filters the list was asked with, so a cursor that was altered, or replayed with other
 * filters, is refused with 400 instead of silently returning a wrong page.
 */
export function createCursorCodec(key: Buffer) {
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url').slice(0, 32);
  // The filters of a list repeat from page to page (and across clients of one conversation): their
  // hash is kept rather than computed again for every page answered and every cursor read.
  const hashOfText = memoised(1000, (text: string) => createHmac('sha256', key).update(text).digest('base64url').slice(0, 16));
  const scopeHash = (scope: unknown) => hashOfText(JSON.stringify(scope));

  return {
    encode(position: Position, scope: unknown): string {
      const payload = Buffer.from(JSON.stringify({ t: position.createdAt, i: position.id, s: scopeHash(scope) })).toString('base64url');
      return `${payload}.${sign(payload)}`;
    },

    decode(cursor: string, scope: unknown): Position {
      const bad = (why: string) => invalid(`Invalid cursor: ${why}.`, [{ path: '/query/cursor', message: why }]);
      const [payload, mac, extra] = cursor.split('.');
      if (!payload || !mac || extra !== undefined || !safeEqual(sign(payload), mac)) throw bad('it was not issued by this service or was altered');
      let parsed: { t?: unknown; i?: unknown; s?: unknown };
      try {
        parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        throw bad('it is malformed');
      }
      if (typeof parsed.t !== 'number' || typeof parsed.i !== 'string') throw bad('it is malformed');
      if (parsed.s !== scopeHash(scope)) throw bad('it was made for other filters; repeat the first request without a cursor');
      return { createdAt: parsed.t, id: parsed.i };
    },
  };
}

export type CursorCodec = ReturnType<typeof createCursorCodec>;

/** Splits a `limit + 1` fetch into a page and its `page` object. */
export function toPage<Row extends { created_at: number; id: string }, Dto>(
  rows: Row[],
  limit: number,
  map: (rows: Row[]) => Dto[],
  codec: CursorCodec,
  scope: unknown,
) {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: map(pageRows),
    page: {
      nextCursor: hasMore && last ? codec.encode({ createdAt: Number(last.created_at), id: last.id }, scope) : null,
      hasMore,
    },
  };
}
