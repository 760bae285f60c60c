import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';
import type { KnownName } from './display-name';
import type { ReplyEmailSubscriber } from './reply-email-rules';

/** What the site knows of a visitor (018_people.ts); a visitor who never said who it is has no row. */
export interface VisitorRow {
  site_id: string;
  id: string;
  name: string | null;
  name_verified: boolean;
  email: string | null;
  email_verified: boolean;
  first_seen_at: number;
  last_seen_at: number;
  reply_email_at: number | null;
  reply_email_unsubscribed_at: number | null;
}

export interface VisitorProfile {
  siteId: string;
  id: string;
  name: string | null;
  nameVerified: boolean;
  email: string | null;
  emailVerified: boolean;
  firstSeenAt: number;
  lastSeenAt: number;
  /** When the visitor left its email in the window to be told of replies; null: never. */
  replyEmailAt: number | null;
  /** When it unsubscribed from reply emails with one click; null: still subscribed (or never). */
  replyEmailUnsubscribedAt: number | null;
}

/** What a visitor said of itself: each field with whether the site's server vouched for it. */
export interface VisitorClaim {
  name?: string | null;
  email?: string | null;
  verified: boolean;
}

const COLUMNS = [
  'site_id',
  'id',
  'name',
  'name_verified',
  'email',
  'email_verified',
  'first_seen_at',
  'last_seen_at',
  'reply_email_at',
  'reply_email_unsubscribed_at',
] as const;

/** The one row mapping of `visitors`: SQLite and MySQL both hand booleans back as 0/1, mysql2 BIGINT maybe as a string. */
export function mapVisitorRow(raw: VisitorRow): VisitorProfile {
  const row = withNumericColumns(raw, ['first_seen_at', 'last_seen_at', 'reply_email_at', 'reply_email_unsubscribed_at']);
  return {
    siteId: row.site_id,
    id: row.id,
    name: row.name,
    nameVerified: Boolean(row.name_verified),
    email: row.email,
    emailVerified: Boolean(row.email_verified),
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
    replyEmailAt: row.reply_email_at ?? null,
    replyEmailUnsubscribedAt: row.reply_email_unsubscribed_at ?? null,
  };
}

/** A visitor's name beside each conversation of a list (`joinVisitorNames`): null when the site knows none. */
export interface VisitorNameColumns {
  visitor_name: string | null;
  visitor_name_verified: boolean | number | null;
}

/**
 * Beside each conversation of `q` (a query on `conversations`), what the site knows of its
 * visitor's name as VisitorNameColumns: one primary-key look-up of `visitors` per row, in the
 * list's own statement instead of a read of its own.
 */
export function joinVisitorNames(q: Knex.QueryBuilder): Knex.QueryBuilder {
  return q
    .leftJoin('visitors', (j) => j.on('visitors.site_id', '=', 'conversations.site_id').andOn('visitors.id', '=', 'conversations.visitor_id'))
    .select('visitors.name as visitor_name', 'visitors.name_verified as visitor_name_verified');
}

/**
 * Beside a statement on `conversations`, what the reply-email rules read of its visitor
 * (ReplyEmailSubscriber) as three scalar subqueries: a reply's lock of its conversation learns
 * whether the visitor takes reply emails without a read of its own. Subqueries, not a join: inside
 * a locking read (FOR UPDATE) MariaDB reads them without locking, so a visitor leaving or
 * withdrawing its email never waits for a reply's commit.
 */
export function replyEmailColumns(db: Knex): Knex.Raw[] {
  const of = (column: string, as: string) =>
    db.raw(`(SELECT ${column} FROM visitors WHERE visitors.site_id = conversations.site_id AND visitors.id = conversations.visitor_id) AS ${as}`);
  return [
    of('email', 'visitor_email'),
    of('reply_email_at', 'visitor_reply_email_at'),
    of('reply_email_unsubscribed_at', 'visitor_reply_email_unsubscribed_at'),
  ];
}

/** replyEmailColumns' columns of a row as the reply-email rules take them (null columns: no row, or never subscribed). */
export function replyEmailSubscriberOf(row: ReplyEmailColumns): ReplyEmailSubscriber {
  const numeric = withNumericColumns(row, ['visitor_reply_email_at', 'visitor_reply_email_unsubscribed_at']);
  return {
    email: numeric.visitor_email ?? null,
    replyEmailAt: numeric.visitor_reply_email_at ?? null,
    replyEmailUnsubscribedAt: numeric.visitor_reply_email_unsubscribed_at ?? null,
  };
}

export interface ReplyEmailColumns {
  visitor_email?: string | null;
  visitor_reply_email_at?: number | null;
  visitor_reply_email_unsubscribed_at?: number | null;
}

/** The joined name as the display-name rules take it (server/visitors/display-name.ts); undefined for a visitor without a row. */
export function knownNameOf(row: VisitorNameColumns): KnownName | undefined {
  return row.visitor_name_verified === null ? undefined : { name: row.visitor_name, nameVerified: Boolean(row.visitor_name_verified) };
}

export function createVisitorStore(db: Knex) {
  return {
    async find(siteId: string, id: string, trx: Knex = db): Promise<VisitorProfile | undefined> {
      const row: VisitorRow | undefined = await trx('visitors').where({ site_id: siteId, id }).first(COLUMNS);
      return row && mapVisitorRow(row);
    },

    /** The profiles of these visitors of one site, in one read (a list page's rows). */
    async findMany(siteId: string, ids: readonly string[], trx: Knex = db): Promise<Map<string, VisitorProfile>> {
      const unique = [...new Set(ids)];
      if (!unique.length) return new Map();
      const rows: VisitorRow[] = await trx('visitors').where('site_id', siteId).whereIn('id', unique).select(COLUMNS);
      return new Map(rows.map((r) => [r.id, mapVisitorRow(r)]));
    },

    /**
     * Records what a visitor said of itself at `at`. A verified claim replaces what is stored; an
     * unverified one never overwrites a verified field (a page cannot rename a visitor its server
     * vouched for). Fields left undefined stay as they are.
     */
    async record(siteId: string, id: string, claim: VisitorClaim, at: number, trx: Knex = db): Promise<void> {
      await trx.transaction(async (t) => {
        const current: VisitorRow | undefined = await t('visitors').where({ site_id: siteId, id }).first(COLUMNS);
        const next: Partial<VisitorRow> = { last_seen_at: at };
        if (claim.name !== undefined && (claim.verified || !current?.name_verified)) Object.assign(next, { name: claim.name, name_verified: claim.verified });
        if (claim.email !== undefined && (claim.verified || !current?.email_verified))
          Object.assign(next, { email: claim.email, email_verified: claim.verified });
        if (current) {
          await t('visitors').where({ site_id: siteId, id }).update(next);
          return;
        }
        // Two first claims at once meet on the primary key; the later one's fields win, as they would in turn.
        await t('visitors')
          .insert({ site_id: siteId, id, name: null, name_verified: false, email: null, email_verified: false, first_seen_at: at, ...next })
          .onConflict(['site_id', 'id'])
          .merge(Object.keys(next));
      });
    },

    /** The visitor asked, in the window, for replies by email (its consent): subscribed again if it had left. */
    async subscribeReplyEmails(trx: Knex.Transaction, siteId: string, id: string, at: number): Promise<void> {
      await trx('visitors').where({ site_id: siteId, id }).update({ reply_email_at: at, reply_email_unsubscribed_at: null });
    },

    /** One-click unsubscribe: no more reply emails; answers whether the visitor was subscribed. */
    async unsubscribeReplyEmails(siteId: string, id: string, at: number, trx: Knex = db): Promise<boolean> {
      const n = await trx('visitors')
        .where({ site_id: siteId, id })
        .whereNotNull('reply_email_at')
        .whereNull('reply_email_unsubscribed_at')
        .update({ reply_email_unsubscribed_at: at });
      return Number(n) > 0;
    },

    /** Forgets a visitor (deleting its data); answers whether there was a row. */
    async remove(siteId: string, id: string, trx: Knex = db): Promise<boolean> {
      return Number(await trx('visitors').where({ site_id: siteId, id }).delete()) > 0;
    },
  };
}

export type VisitorStore = StoreContract<ReturnType<typeof createVisitorStore>>;
