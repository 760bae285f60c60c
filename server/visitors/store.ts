import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';

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
}

/** What a visitor said of itself: each field with whether the site's server vouched for it. */
export interface VisitorClaim {
  name?: string | null;
  email?: string | null;
  verified: boolean;
}

const COLUMNS = ['site_id', 'id', 'name', 'name_verified', 'email', 'email_verified', 'first_seen_at', 'last_seen_at'] as const;

/** The one row mapping of `visitors`: SQLite and MySQL both hand booleans back as 0/1, mysql2 BIGINT maybe as a string. */
export function mapVisitorRow(raw: VisitorRow): VisitorProfile {
  const row = withNumericColumns(raw, ['first_seen_at', 'last_seen_at']);
  return {
    siteId: row.site_id,
    id: row.id,
    name: row.name,
    nameVerified: Boolean(row.name_verified),
    email: row.email,
    emailVerified: Boolean(row.email_verified),
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
  };
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

    /** Forgets a visitor (deleting its data); answers whether there was a row. */
    async remove(siteId: string, id: string, trx: Knex = db): Promise<boolean> {
      return Number(await trx('visitors').where({ site_id: siteId, id }).delete()) > 0;
    },
  };
}

export type VisitorStore = StoreContract<ReturnType<typeof createVisitorStore>>;
