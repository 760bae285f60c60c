import type { Knex } from 'knex';
import { isUniqueViolation, withNumericColumns } from '../db/knex';
import { toIso, toIsoRequired } from '../platform/time';
import type { Scope } from './scopes';
import { precompiled } from '../db/precompiled';
import type { StoreContract } from '../db/store-contract';

export interface SiteRow {
  id: string;
  name: string;
  created_at: number;
}

export interface ApiKeyRow {
  id: string;
  site_id: string;
  fingerprint: string;
  display_prefix: string;
  scopes: string;
  label: string | null;
  /** The account that issued it through the management API; null for the operator CLI. */
  created_by: string | null;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
}

/** The chat window's settings of a site (issue 9); a site without a row has identity verification off. */
export interface WindowSettingsRow {
  site_id: string;
  identity_mode: IdentityMode;
  identity_secret_encrypted: string | null;
  updated_at: number;
}

export type IdentityMode = 'off' | 'optional' | 'enforce';

/**
 * What a window request needs of its site, in one read: the site exists (a row at all), its token's
 * origin is still allowed, its window settings, and the revocation times of the site and the visitor.
 */
export interface WindowAccessRow {
  identity_mode: IdentityMode | null;
  identity_secret_encrypted: string | null;
  allowed_origin: string | null;
  site_revoked_before: number | null;
  visitor_revoked_before: number | null;
}

const SITE_COLUMNS = ['id', 'name', 'created_at'] as const;
const KEY_COLUMNS = ['id', 'site_id', 'fingerprint', 'display_prefix', 'scopes', 'label', 'created_by', 'created_at', 'revoked_at', 'last_used_at'] as const;
const WINDOW_SETTINGS_COLUMNS = ['site_id', 'identity_mode', 'identity_secret_encrypted', 'updated_at'] as const;

/** The one row mapping of each table (mysql2 may hand BIGINT back as a string). */
export const mapSiteRow = (row: SiteRow): SiteRow => withNumericColumns(row, ['created_at']);
export const mapKeyRow = (row: ApiKeyRow): ApiKeyRow => withNumericColumns(row, ['created_at', 'revoked_at', 'last_used_at']);
export const mapWindowSettingsRow = (row: WindowSettingsRow): WindowSettingsRow => withNumericColumns(row, ['updated_at']);

export function createAccessStore(db: Knex) {
  const keyByFingerprint = precompiled<ApiKeyRow>(db, 1, (v) => db('api_keys').where({ fingerprint: v[0] }).first(KEY_COLUMNS));
  // Every lookup is by primary key; one round trip for every window request.
  const windowAccess = precompiled<WindowAccessRow>(db, 3, (v) =>
    db('sites as s')
      .leftJoin('site_window_settings as ws', 'ws.site_id', 's.id')
      .leftJoin('site_allowed_origins as o', (j) => j.on('o.site_id', 's.id').andOnVal('o.origin', '=', v[1]))
      .leftJoin('window_visitor_revocations as r', (j) => j.on('r.site_id', 's.id').andOnVal('r.visitor_id', '=', v[2]))
      .where('s.id', v[0])
      .first(
        'ws.identity_mode',
        'ws.identity_secret_encrypted',
        'o.origin as allowed_origin',
        'ws.visitors_revoked_before as site_revoked_before',
        'r.revoked_before as visitor_revoked_before',
      ),
  );
  /**
   * Moves a revocation time forward to `at` (never back: a later revocation already written wins),
   * inserting its row when there is none; two writers racing on the insert both end up updating.
   */
  async function revokeFrom(at: number, table: string, key: Record<string, string>, column: string, insertRow: Record<string, unknown>) {
    for (let attempt = 1; ; attempt++) {
      const moved = await db(table)
        .where(key)
        .andWhere((q) => q.whereNull(column).orWhere(column, '<', at))
        .update({ [column]: at });
      if (Number(moved) > 0 || (await db(table).where(key).first(column))) return;
      try {
        await db(table).insert({ ...key, ...insertRow, [column]: at });
        return;
      } catch (err) {
        if (!isUniqueViolation(err) || attempt >= 3) throw err;
      }
    }
  }
  const key = async (query: Knex.QueryBuilder) => {
    const row: ApiKeyRow | undefined = await query.first(KEY_COLUMNS);
    return row && mapKeyRow(row);
  };
  return {
    /** The database, for a change the management API audits in the same transaction. */
    db,
    insertSite: (row: SiteRow, trx: Knex = db) => trx('sites').insert(row),
    renameSite: (id: string, name: string, trx: Knex = db) => trx('sites').where({ id }).update({ name }),
    findSite: async (id: string, trx: Knex = db) => {
      const row: SiteRow | undefined = await trx('sites').where({ id }).first(SITE_COLUMNS);
      return row && mapSiteRow(row);
    },
    listSites: async () => ((await db('sites').orderBy('created_at').select(SITE_COLUMNS)) as SiteRow[]).map(mapSiteRow),
    countSites: async () => Number((await db('sites').count({ n: '*' }).first())?.n ?? 0),

    /** The exact origins allowed to embed the site's chat window, sorted. */
    listOrigins: async (siteId: string, trx: Knex = db): Promise<string[]> =>
      (await trx('site_allowed_origins').where({ site_id: siteId }).orderBy('origin').select('origin')).map((r: { origin: string }) => r.origin),
    /** One site's whole list at once (in the caller's transaction), so a reader never sees half of an update. */
    replaceOrigins: async (siteId: string, origins: string[], trx: Knex.Transaction) => {
      await trx('site_allowed_origins').where({ site_id: siteId }).delete();
      if (origins.length) await trx('site_allowed_origins').insert(origins.map((origin) => ({ site_id: siteId, origin })));
    },
    isOriginAllowed: async (siteId: string, origin: string) => !!(await db('site_allowed_origins').where({ site_id: siteId, origin }).first('origin')),
    findWindowSettings: async (siteId: string, trx: Knex = db) => {
      const row: WindowSettingsRow | undefined = await trx('site_window_settings').where({ site_id: siteId }).first(WINDOW_SETTINGS_COLUMNS);
      return row && mapWindowSettingsRow(row);
    },
    async saveWindowSettings(row: WindowSettingsRow, trx: Knex = db) {
      const updated = await trx('site_window_settings').where({ site_id: row.site_id }).update(row);
      if (Number(updated) === 0) await trx('site_window_settings').insert(row);
    },

    /**
     * What the chat window names a reply by on this site (server/window/authors.ts): the site's
     * name, and whether agents' names are shown (a site without a settings row shows them).
     * Undefined when there is no such site.
     */
    findReplyNaming: async (siteId: string): Promise<{ siteName: string; agentNames: boolean } | undefined> => {
      const row: { name: string; agent_names: unknown } | undefined = await db('sites as s')
        .leftJoin('site_window_settings as ws', 'ws.site_id', 's.id')
        .where('s.id', siteId)
        .first('s.name', 'ws.agent_names');
      return row && { siteName: row.name, agentNames: row.agent_names === null || row.agent_names === undefined ? true : Boolean(row.agent_names) };
    },
    /** Shows or hides agents' names in the site's chat window (the settings row is made when missing). */
    setAgentNames: async (siteId: string, shown: boolean, at: number, trx: Knex = db): Promise<void> => {
      await trx('site_window_settings')
        .insert({ site_id: siteId, identity_mode: 'off', identity_secret_encrypted: null, updated_at: at, agent_names: shown })
        .onConflict('site_id')
        .merge(['agent_names', 'updated_at']);
    },

    /** The window's one read per request (WindowAccessRow); undefined when there is no such site. */
    findWindowAccess: async (siteId: string, origin: string, visitorId: string): Promise<WindowAccessRow | undefined> => {
      const [row] = await windowAccess([siteId, origin, visitorId]);
      return row && withNumericColumns(row, ['site_revoked_before', 'visitor_revoked_before']);
    },
    /** Voids the visitor's window credentials and sessions begun at or before `at`. */
    revokeVisitor: (siteId: string, visitorId: string, at: number) =>
      revokeFrom(at, 'window_visitor_revocations', { site_id: siteId, visitor_id: visitorId }, 'revoked_before', {}),
    /** Forgets per-visitor revocations older than `before`: every credential they void has expired by then. */
    purgeVisitorRevocations: (before: number) => db('window_visitor_revocations').where('revoked_before', '<', before).del(),
    /** Voids every visitor's window credentials and sessions of the site begun at or before `at`. */
    revokeAllVisitors: (siteId: string, at: number) =>
      revokeFrom(at, 'site_window_settings', { site_id: siteId }, 'visitors_revoked_before', {
        identity_mode: 'off',
        identity_secret_encrypted: null,
        updated_at: at,
      }),

    insertKey: (row: ApiKeyRow, trx: Knex = db) => trx('api_keys').insert(row),
    /** Authentication's one query: the key with its site and rights, by the unique fingerprint. */
    findKeyByFingerprint: async (fingerprint: string): Promise<ApiKeyRow | undefined> => {
      const [row] = await keyByFingerprint([fingerprint]);
      return row && mapKeyRow(row);
    },
    findKey: (id: string) => key(db('api_keys').where({ id })),
    listKeys: async (siteId: string) =>
      ((await db('api_keys').where({ site_id: siteId }).orderBy('created_at').select(KEY_COLUMNS)) as ApiKeyRow[]).map(mapKeyRow),
    /** `limit` keys of the site after `after`, oldest first by (created_at, id). */
    listKeysPage: async (siteId: string, limit: number, after?: { createdAt: number; id: string }) => {
      const q = db('api_keys').where({ site_id: siteId });
      if (after)
        q.andWhere((w) => w.where('created_at', '>', after.createdAt).orWhere((x) => x.where('created_at', after.createdAt).andWhere('id', '>', after.id)));
      return (
        (await q
          .orderBy([{ column: 'created_at' }, { column: 'id' }])
          .limit(limit)
          .select(KEY_COLUMNS)) as ApiKeyRow[]
      ).map(mapKeyRow);
    },
    revokeKey: (id: string, at: number, trx: Knex = db) => trx('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at }),
    /** Writes lastUsedAt at most once a minute per key, so reads do not turn into a write each. */
    touchKey: (id: string, at: number) =>
      db('api_keys')
        .where({ id })
        .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', at - 60_000))
        .update({ last_used_at: at }),
  };
}

export type AccessStore = StoreContract<ReturnType<typeof createAccessStore>>;

export function keyToDto(row: ApiKeyRow) {
  return {
    id: row.id,
    siteId: row.site_id,
    prefix: row.display_prefix,
    scopes: row.scopes.split(',') as Scope[],
    label: row.label,
    createdBy: row.created_by,
    createdAt: toIsoRequired(row.created_at),
    revokedAt: toIso(row.revoked_at),
    lastUsedAt: toIso(row.last_used_at),
  };
}
