import type { Knex } from 'knex';
import { toIso } from '../platform/time';

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

export function createAccessStore(db: Knex) {
  return {
    insertSite: (row: SiteRow) => db('sites').insert(row),
    findSite: (id: string) => db<SiteRow>('sites').where({ id }).first(),
    listSites: () => db<SiteRow>('sites').orderBy('created_at'),
    countSites: async () => Number((await db('sites').count({ n: '*' }).first())?.n ?? 0),

    /** The exact origins allowed to embed the site's chat window, sorted. */
    listOrigins: async (siteId: string): Promise<string[]> =>
      (await db('site_allowed_origins').where({ site_id: siteId }).orderBy('origin').select('origin')).map((r: { origin: string }) => r.origin),
    /** One site's whole list at once, so a reader never sees half of an update. */
    replaceOrigins: (siteId: string, origins: string[]) =>
      db.transaction(async (trx) => {
        await trx('site_allowed_origins').where({ site_id: siteId }).delete();
        if (origins.length) await trx('site_allowed_origins').insert(origins.map((origin) => ({ site_id: siteId, origin })));
      }),
    isOriginAllowed: async (siteId: string, origin: string) =>
      !!(await db('site_allowed_origins').where({ site_id: siteId, origin }).first('origin')),
    findWindowSettings: (siteId: string) => db<WindowSettingsRow>('site_window_settings').where({ site_id: siteId }).first(),
    async saveWindowSettings(row: WindowSettingsRow) {
      const updated = await db('site_window_settings').where({ site_id: row.site_id }).update(row);
      if (Number(updated) === 0) await db('site_window_settings').insert(row);
    },

    insertKey: (row: ApiKeyRow) => db('api_keys').insert(row),
    findKeyByFingerprint: (fingerprint: string) => db<ApiKeyRow>('api_keys').where({ fingerprint }).first(),
    findKey: (id: string) => db<ApiKeyRow>('api_keys').where({ id }).first(),
    listKeys: (siteId: string) => db<ApiKeyRow>('api_keys').where({ site_id: siteId }).orderBy('created_at'),
    revokeKey: (id: string, at: number) => db('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at }),
    /** Writes lastUsedAt at most once a minute per key, so reads do not turn into a write each. */
    touchKey: (id: string, at: number) =>
      db('api_keys')
        .where({ id })
        .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', at - 60_000))
        .update({ last_used_at: at }),
  };
}

export type AccessStore = ReturnType<typeof createAccessStore>;

export function keyToDto(row: ApiKeyRow) {
  return {
    id: row.id,
    siteId: row.site_id,
    prefix: row.display_prefix,
    scopes: row.scopes.split(','),
    label: row.label,
    createdAt: toIso(row.created_at),
    revokedAt: toIso(row.revoked_at),
    lastUsedAt: toIso(row.last_used_at),
  };
}
