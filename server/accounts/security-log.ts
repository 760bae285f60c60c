import type { Knex } from 'knex';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { CursorCodec, toPage } from '../platform/cursor';
import type { Manager } from './common';
import type { AccountStore, SecurityLogRow } from './store';

/** Kept as long as GitHub keeps a security log's entries for the account: 90 days. */
export const SECURITY_LOG_RETENTION_MS = 90 * 24 * 3600_000;

/**
 * What the log records about an account's credentials. `sessions.ended.*` is every session of the
 * account ended at once (by an owner, by a password or role change, by a removal from a site).
 */
export const SECURITY_ACTIONS = [
  'session.signed_in',
  'session.sign_in_failed',
  'session.signed_out',
  'session.ended',
  'sessions.ended.owner',
  'sessions.ended.password_change',
  'sessions.ended.role_change',
  'sessions.ended.removal',
  'account.password_changed',
  'account.password_reset',
  'sessions.ended.password_reset',
  'account.email_verified',
  'account.email_change_requested',
  'account.email_changed',
  'token.created',
  'token.revoked',
  'sudo.granted',
  'sudo.refused',
] as const;
export type SecurityAction = (typeof SECURITY_ACTIONS)[number];

/**
 * One thing that happened to the account's credentials. `clientIp` and `userAgent` are those of
 * the request that did it when the account itself made it; an owner's or the operator's change
 * leaves them null, so a member's log never shows another person's address.
 */
export interface SecurityEvent {
  accountId: string;
  action: SecurityAction;
  clientIp?: string | null;
  userAgent?: string | null;
  sessionId?: string | null;
  tokenId?: string | null;
}

export type SecurityLogStore = Pick<AccountStore, 'db' | 'insertSecurityEntry' | 'listSecurityLog' | 'purgeSecurityLog'>;

export const securityEntryToDto = (r: SecurityLogRow) => ({
  id: r.id,
  createdAt: toIsoRequired(r.created_at),
  action: r.action as SecurityAction,
  clientAddress: r.client_ip,
  userAgent: r.user_agent,
  sessionId: r.session_id,
  tokenId: r.token_id,
});

/** What a signed-in request tells the log of itself. */
export const eventOf = (manager: Manager, meta: { clientIp?: string | null; userAgent?: string | null }) => ({
  accountId: manager.accountId,
  clientIp: meta.clientIp ?? null,
  userAgent: meta.userAgent ?? null,
  sessionId: manager.sessionId ?? null,
  tokenId: manager.tokenId ?? null,
});

/**
 * The account's own security log, as GitHub's: written in the transaction of the change it records
 * (a failed sign-in changes nothing and is one insert), read by the account only, newest first.
 */
export function createSecurityLog(opts: { store: SecurityLogStore; cursors: CursorCodec; now: () => number }) {
  const { store, now } = opts;
  return {
    record(e: SecurityEvent, trx: Knex = store.db) {
      const at = now();
      return store.insertSecurityEntry(
        {
          id: newId('sec', at),
          account_id: e.accountId,
          created_at: at,
          action: e.action,
          client_ip: e.clientIp ? e.clientIp.slice(0, 64) : null,
          user_agent: e.userAgent ? e.userAgent.slice(0, 512) : null,
          session_id: e.sessionId ?? null,
          token_id: e.tokenId ?? null,
        },
        trx,
      );
    },
    /** A page of the caller's own entries; the cursor is bound to the account. */
    async page(manager: Manager, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { log: 'security', accountId: manager.accountId };
      const after = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.listSecurityLog(manager.accountId, limit + 1, after);
      return toPage(rows, limit, (page) => page.map(securityEntryToDto), opts.cursors, scope);
    },
    /** Maintenance: entries older than 90 days. */
    purge: async (at = now()) => Number(await store.purgeSecurityLog(at - SECURITY_LOG_RETENTION_MS)),
  };
}

export type SecurityLog = ReturnType<typeof createSecurityLog>;
