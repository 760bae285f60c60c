import { newId } from '../platform/ids';
import { randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { ApiError } from '../platform/errors';
import { toIsoRequired } from '../platform/time';
import type { Scope } from './scopes';
import { AccessStore, keyToDto } from './store';

export const KEY_PREFIX = 'wck_';

/** What a request knows about its caller once the key is checked. */
export interface Principal {
  keyId: string;
  siteId: string;
  scopes: Scope[];
}

export function createAccessService(store: AccessStore, now: () => number = Date.now) {
  return {
    async createSite(name: string) {
      const trimmed = name.trim();
      if (!trimmed || trimmed.length > 200) throw new Error('a site name is 1 to 200 characters');
      const row = { id: newId('ws'), name: trimmed, created_at: now() };
      await store.insertSite(row);
      return { id: row.id, name: row.name };
    },

    /** Issues a key: the secret is returned once and only its SHA-256 fingerprint is stored. */
    async listSites() {
      return (await store.listSites()).map((s) => ({ id: s.id, name: s.name, createdAt: toIsoRequired(s.created_at) }));
    },

    hasSites: async () => (await store.countSites()) > 0,

    async createKey(siteId: string, scopes: Scope[], label?: string) {
      if (!(await store.findSite(siteId))) throw new Error(`no site ${siteId}`);
      const key = KEY_PREFIX + randomBase62(32);
      const row = {
        id: newId('key'),
        site_id: siteId,
        fingerprint: sha256Hex(key),
        display_prefix: key.slice(0, 12),
        scopes: scopes.join(','),
        label: label ?? null,
        created_at: now(),
        revoked_at: null,
        last_used_at: null,
      };
      await store.insertKey(row);
      return { id: row.id, key, scopes: [...scopes] };
    },

    async listKeys(siteId: string) {
      return (await store.listKeys(siteId)).map(keyToDto);
    },

    async revokeKey(id: string) {
      const at = now();
      await store.revokeKey(id, at);
      const row = await store.findKey(id);
      if (!row) throw new Error(`no key ${id}`);
      return { id: row.id, revokedAt: toIsoRequired(row.revoked_at!) };
    },

    /**
     * Looks the key up by fingerprint on every request (no cache), so a revocation takes effect on
     * the very next request on every instance.
     */
    async authenticate(presented: string): Promise<Principal> {
      const fail = () => new ApiError('unauthorized', 'Missing, invalid or revoked API key.');
      if (!presented.startsWith(KEY_PREFIX) || presented.length > 200) throw fail();
      const fingerprint = sha256Hex(presented);
      const row = await store.findKeyByFingerprint(fingerprint);
      if (!row || !safeEqual(row.fingerprint, fingerprint) || row.revoked_at !== null) throw fail();
      // lastUsedAt moves at most once a minute: skip the write (a lock on SQLite) when it is fresh.
      const at = now();
      if (row.last_used_at === null || Number(row.last_used_at) < at - 60_000) await store.touchKey(row.id, at);
      return { keyId: row.id, siteId: row.site_id, scopes: row.scopes.split(',') as Scope[] };
    },
  };
}

export type AccessService = ReturnType<typeof createAccessService>;
