import { createHmac, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../platform/errors';

export type UnsubscribeSubject = { kind: 'member'; siteId: string; accountId: string } | { kind: 'visitor'; siteId: string; visitorId: string };

export interface Unsubscribe {
  /** The https URL for List-Unsubscribe and the email's unsubscribe line. */
  url(subject: UnsubscribeSubject): string;
  /** The feature that owns the subject's preference registers what unsubscribing does. */
  handle<K extends UnsubscribeSubject['kind']>(kind: K, fn: (s: Extract<UnsubscribeSubject, { kind: K }>) => Promise<void>): void;
  /** The subject a token names, or a 404 for a token this service did not make (checked in constant time). */
  verify(token: string): UnsubscribeSubject;
  /** Verifies the token and runs its kind's handler (the one-click POST). */
  apply(token: string): Promise<UnsubscribeSubject>;
}

/** Where the one-click POST and the confirm page are (openapi/manage.yaml, tag Email). */
export const UNSUBSCRIBE_PATH = '/manage/v1/unsubscribe/';

const TOKEN = /^([A-Za-z0-9_-]{1,400})\.([A-Za-z0-9_-]{43})$/;

const notValid = () =>
  new ApiError(
    'not_found',
    'This unsubscribe link is not valid: it was changed or cut short. Use the link of the email as it is, or change the setting in the dashboard.',
  );

/**
 * Unsubscribe links that need no stored row: the token is the subject and an HMAC of it under a key
 * derived from MASTER_KEY, so it is checked by recomputing, never expires (an old email's link keeps
 * working) and cannot be made for another subject without the key.
 */
export function createUnsubscribe(opts: { key: Buffer; publicUrl: string }): Unsubscribe {
  const base = new URL(UNSUBSCRIBE_PATH, opts.publicUrl).href;
  const handlers = new Map<string, (s: never) => Promise<void>>();
  const mac = (payload: string) => createHmac('sha256', opts.key).update(payload).digest();

  function tokenOf(subject: UnsubscribeSubject): string {
    const id = subject.kind === 'member' ? subject.accountId : subject.visitorId;
    const payload = Buffer.from(JSON.stringify([subject.kind, subject.siteId, id])).toString('base64url');
    return `${payload}.${mac(payload).toString('base64url')}`;
  }

  function verify(token: string): UnsubscribeSubject {
    const m = TOKEN.exec(token);
    if (!m) throw notValid();
    const given = Buffer.from(m[2], 'base64url');
    const expected = mac(m[1]);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw notValid();
    const parts = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8')) as [string, string, string];
    if (parts[0] === 'member') return { kind: 'member', siteId: parts[1], accountId: parts[2] };
    if (parts[0] === 'visitor') return { kind: 'visitor', siteId: parts[1], visitorId: parts[2] };
    throw notValid();
  }

  return {
    url: (subject) => base + tokenOf(subject),
    handle(kind, fn) {
      handlers.set(kind, fn as (s: never) => Promise<void>);
    },
    verify,
    async apply(token) {
      const subject = verify(token);
      const handler = handlers.get(subject.kind);
      if (!handler) throw new ApiError('not_found', 'These emails can no longer be unsubscribed from here; change the setting in the dashboard.');
      await handler(subject as never);
      return subject;
    },
  };
}
