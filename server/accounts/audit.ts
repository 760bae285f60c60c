import type { Knex } from 'knex';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { CursorCodec, toPage } from '../platform/cursor';
import type { AccountStore, AuditRow } from './store';

export const AUDIT_RETENTION_MS = 365 * 24 * 3600_000;

export type AuditStore = Pick<AccountStore, 'db' | 'insertAudit' | 'listAudit' | 'emailsOf' | 'purgeAudit'>;

/** Who did something: an account (by session or management token), or `manager` null for the operator CLI. */
export interface AuditActor {
  manager: { accountId: string; tokenId?: string } | null;
  clientIp: string | null;
}

/** An entry as the API shows it; `emails` names the accounts it mentions (former members too, as accounts stay). */
export function auditToDto(r: AuditRow, emails: Map<string, string>) {
  const email = (id: string | null) => (id === null ? null : (emails.get(id) ?? null));
  const actor = r.actor_token_id
    ? { type: 'token' as const, accountId: r.actor_account_id, email: email(r.actor_account_id), tokenId: r.actor_token_id }
    : r.actor_account_id
      ? { type: 'account' as const, accountId: r.actor_account_id, email: email(r.actor_account_id), tokenId: null }
      : { type: 'operator' as const, accountId: null, email: null, tokenId: null };
  return {
    id: r.id,
    createdAt: toIsoRequired(r.created_at),
    actor,
    action: r.action,
    objectId: r.object_id,
    objectEmail: objectIsAccount(r.action) ? email(r.object_id) : null,
    clientAddress: r.client_ip,
  };
}

/**
 * Whether an action's object is an account (`member.*`, `account.*`). Told by the action, never by
 * the id's look: a visitor id is text the site's page chose, and could be made to look like one.
 */
const objectIsAccount = (action: string) => action.startsWith('member.') || action.startsWith('account.');

/** The accounts entries name: their actors, and their objects when those are accounts. */
const accountsNamed = (rows: AuditRow[]) => [
  ...new Set(rows.flatMap((r) => [r.actor_account_id, objectIsAccount(r.action) ? r.object_id : null]).filter((id): id is string => id !== null)),
];

/**
 * The audit log of sites: what each management operation did, written in the transaction of the
 * change it describes when it has one, so the log never claims a change that did not commit.
 * Actions are `<object>.<verb>[.<detail>]`, for example `member.role_changed.agent`.
 */
export function createAuditLog(opts: { store: AuditStore; cursors: CursorCodec; now: () => number }) {
  const { store, now } = opts;
  return {
    /** One entry per site in `siteIds`, in `trx` when given. */
    record(actor: AuditActor, siteIds: string[], action: string, objectId: string | null, trx: Knex = store.db) {
      const at = now();
      return store.insertAudit(
        siteIds.map((siteId) => ({
          id: newId('aud', at),
          site_id: siteId,
          created_at: at,
          actor_account_id: actor.manager?.accountId ?? null,
          actor_token_id: actor.manager?.tokenId ?? null,
          action,
          object_id: objectId,
          client_ip: actor.clientIp,
        })),
        trx,
      );
    },
    /** A page of the site's entries, newest first; the cursor is bound to the site. */
    async page(siteId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { log: 'audit', siteId };
      const after = query.cursor ? opts.cursors.decode(query.cursor, scope) : undefined;
      const rows = await store.listAudit(siteId, limit + 1, after);
      const emails = await store.emailsOf(accountsNamed(rows.slice(0, limit)));
      return toPage(rows, limit, (page) => page.map((r) => auditToDto(r, emails)), opts.cursors, scope);
    },
    /** Maintenance: entries over a year old. */
    purge: async (at = now()) => Number(await store.purgeAudit(at - AUDIT_RETENTION_MS)),
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
