import { fakeDb } from './fake-db';
import type { AccessStore, ApiKeyRow, SiteRow, WindowSettingsRow } from '../../server/access/store';

/**
 * The access store in memory, for unit tests of the access service's rules. It answers what the
 * Knex store answers (the same contract, type-checked), including the rules the store itself keeps:
 * a unique key fingerprint, a revocation written once, `last_used_at` moved at most once a minute,
 * and revocation times that only move forward.
 */
export function fakeAccessStore() {
  const sites = new Map<string, SiteRow>();
  const keys = new Map<string, ApiKeyRow>();
  const origins = new Map<string, Set<string>>();
  const settings = new Map<string, WindowSettingsRow & { visitors_revoked_before: number | null }>();
  const visitorRevocations = new Map<string, number>(); // `${siteId}\n${visitorId}` -> revoked_before
  const agentNames = new Map<string, boolean>();
  const visitorKey = (siteId: string, visitorId: string) => `${siteId}\n${visitorId}`;
  const copy = <T extends object>(row: T | undefined): T | undefined => row && { ...row };
  const uniqueViolation = () => Object.assign(new Error('UNIQUE constraint failed'), { code: 'SQLITE_CONSTRAINT_UNIQUE' });
  const later = (current: number | null | undefined, at: number) => (current === null || current === undefined || current < at ? at : current);

  const store: AccessStore = {
    db: fakeDb(),
    insertSite: async (row) => {
      if (sites.has(row.id)) throw uniqueViolation();
      sites.set(row.id, { ...row });
      return [1];
    },
    renameSite: async (id, name) => {
      const row = sites.get(id);
      if (!row) return 0;
      row.name = name;
      return 1;
    },
    findSite: async (id) => copy(sites.get(id)),
    listSites: async () => [...sites.values()].sort((a, b) => a.created_at - b.created_at).map((s) => ({ ...s })),
    countSites: async () => sites.size,

    listOrigins: async (siteId) => [...(origins.get(siteId) ?? [])].sort(),
    replaceOrigins: async (siteId, list) => {
      origins.set(siteId, new Set(list));
    },
    isOriginAllowed: async (siteId, origin) => origins.get(siteId)?.has(origin) ?? false,
    findWindowSettings: async (siteId) => {
      const row = settings.get(siteId);
      if (!row) return undefined;
      const { site_id, identity_mode, identity_secret_encrypted, updated_at } = row;
      return { site_id, identity_mode, identity_secret_encrypted, updated_at };
    },
    saveWindowSettings: async (row) => {
      settings.set(row.site_id, { visitors_revoked_before: null, ...settings.get(row.site_id), ...row });
    },

    findReplyNaming: async (siteId) => {
      const site = sites.get(siteId);
      return site && { siteName: site.name, agentNames: agentNames.get(siteId) ?? true };
    },
    setAgentNames: async (siteId, shown) => {
      agentNames.set(siteId, shown);
    },

    findWindowAccess: async (siteId, origin, visitorId) => {
      if (!sites.has(siteId)) return undefined;
      const ws = settings.get(siteId);
      return {
        identity_mode: ws?.identity_mode ?? null,
        identity_secret_encrypted: ws?.identity_secret_encrypted ?? null,
        allowed_origin: origins.get(siteId)?.has(origin) ? origin : null,
        site_revoked_before: ws?.visitors_revoked_before ?? null,
        visitor_revoked_before: visitorRevocations.get(visitorKey(siteId, visitorId)) ?? null,
      };
    },
    revokeVisitor: async (siteId, visitorId, at) => {
      const k = visitorKey(siteId, visitorId);
      visitorRevocations.set(k, later(visitorRevocations.get(k), at));
    },
    purgeVisitorRevocations: async (before) => {
      let n = 0;
      for (const [k, t] of visitorRevocations) if (t < before && visitorRevocations.delete(k)) n++;
      return n;
    },
    revokeAllVisitors: async (siteId, at) => {
      const ws = settings.get(siteId) ?? {
        site_id: siteId,
        identity_mode: 'off',
        identity_secret_encrypted: null,
        updated_at: at,
        visitors_revoked_before: null,
      };
      settings.set(siteId, { ...ws, visitors_revoked_before: later(ws.visitors_revoked_before, at) });
    },

    insertKey: async (row) => {
      if (keys.has(row.id) || [...keys.values()].some((k) => k.fingerprint === row.fingerprint)) throw uniqueViolation();
      keys.set(row.id, { ...row });
      return [1];
    },
    findKeyByFingerprint: async (fingerprint) => copy([...keys.values()].find((k) => k.fingerprint === fingerprint)),
    findKey: async (id) => copy(keys.get(id)),
    listKeys: async (siteId) =>
      [...keys.values()]
        .filter((k) => k.site_id === siteId)
        .sort((a, b) => a.created_at - b.created_at)
        .map((k) => ({ ...k })),
    listKeysPage: async (siteId, limit, after) =>
      [...keys.values()]
        .filter((k) => k.site_id === siteId && (!after || k.created_at > after.createdAt || (k.created_at === after.createdAt && k.id > after.id)))
        .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1))
        .slice(0, limit)
        .map((k) => ({ ...k })),
    revokeKey: async (id, at) => {
      const row = keys.get(id);
      if (!row || row.revoked_at !== null) return 0;
      row.revoked_at = at;
      return 1;
    },
    touchKey: async (id, at) => {
      const row = keys.get(id);
      if (!row || (row.last_used_at !== null && row.last_used_at >= at - 60_000)) return 0;
      row.last_used_at = at;
      return 1;
    },
  };
  /** What the tests may look at directly: the stored rows, as the tables would hold them. */
  return Object.assign(store, { rows: { sites, keys, settings, visitorRevocations } });
}
