import { newId } from '../platform/ids';
import { decrypt, encrypt, randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { VISITOR_ID } from '../window/service';
import { ApiError, invalid } from '../platform/errors';
import { toIsoRequired } from '../platform/time';
import type { Scope } from './scopes';
import { AccessStore, IdentityMode, keyToDto } from './store';

export const KEY_PREFIX = 'wck_';
export const IDENTITY_SECRET_PREFIX = 'wis_';
export const IDENTITY_MODES: IdentityMode[] = ['off', 'optional', 'enforce'];
export const MAX_ALLOWED_ORIGINS = 20;

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * An allowed origin as browsers send it in `Origin`: `https://host[:port]`, lowercase host, no
 * default port, no path, no wildcard. Plain `http://` only for loopback hosts (localhost,
 * 127.0.0.1, [::1]): browsers treat those as secure contexts, and they serve a developer's own
 * page; any other http:// page could be altered on the way, so it cannot vouch for a visitor.
 */
export function normaliseOrigin(input: string): string {
  const text = input.trim();
  const bad = (why: string) => invalid(`"${text}" is not an allowed origin: ${why}.`);
  if (!text || text.length > 300) throw bad('an origin is 1 to 300 characters');
  if (text.includes('*')) throw bad('wildcards are not accepted; list each origin');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad('write it as https://host or https://host:port');
  }
  if (url.username || url.password) throw bad('no user name or password');
  if (url.search || url.hash || !/^[a-z][a-z0-9+.-]*:\/\/[^/?#]+\/?$/i.test(text)) throw bad('an origin has no path, query or fragment');
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) throw bad('use https:// (http:// only for localhost, 127.0.0.1 and [::1])');
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw bad('use https://');
  return url.origin;
}

/** What a request knows about its caller once the key is checked. */
export interface Principal {
  keyId: string;
  siteId: string;
  scopes: Scope[];
}

/**
 * `identitySecretsKey` seals the per-site identity-verification secrets at rest (they are needed in
 * clear to verify a visitor's hash, so a fingerprint cannot do).
 */
export function createAccessService(store: AccessStore, now: () => number = Date.now, identitySecretsKey?: Buffer) {
  const sealKey = () => {
    // A wiring mistake (services.ts always passes the key), not the caller's: an internal error.
    if (!identitySecretsKey) throw new Error('identity verification needs the master key');
    return identitySecretsKey;
  };
  async function mustFindSite(siteId: string) {
    if (!(await store.findSite(siteId))) throw new ApiError('not_found', `Site ${siteId} not found.`);
  }
  async function windowSettings(siteId: string) {
    const row = await store.findWindowSettings(siteId);
    return { mode: (row?.identity_mode ?? 'off') as IdentityMode, sealed: row?.identity_secret_encrypted ?? null };
  }
  return {
    async createSite(name: string) {
      const trimmed = name.trim();
      if (!trimmed || trimmed.length > 200) throw invalid('A site name is 1 to 200 characters.');
      const row = { id: newId('ws'), name: trimmed, created_at: now() };
      await store.insertSite(row);
      return { id: row.id, name: row.name };
    },

    /** Every site with its chat window settings (never the identity secret itself). */
    async listSites() {
      const sites = await store.listSites();
      return Promise.all(
        sites.map(async (s) => {
          const settings = await windowSettings(s.id);
          return {
            id: s.id,
            name: s.name,
            createdAt: toIsoRequired(s.created_at),
            allowedOrigins: await store.listOrigins(s.id),
            identityMode: settings.mode,
            identitySecretSet: settings.sealed !== null,
          };
        }),
      );
    },

    /** Replaces the site's allowed origins (each normalised; duplicates dropped). */
    async setAllowedOrigins(siteId: string, origins: string[]) {
      await mustFindSite(siteId);
      const list = [...new Set(origins.map(normaliseOrigin))];
      if (list.length > MAX_ALLOWED_ORIGINS) throw invalid(`At most ${MAX_ALLOWED_ORIGINS} allowed origins per site.`);
      await store.replaceOrigins(siteId, list);
      return store.listOrigins(siteId);
    },

    /**
     * Sets the identity-verification mode, making a secret when the site has none (or when asked
     * to rotate). The secret is returned only then, once; afterwards only `identitySecretSet` shows.
     */
    async setIdentity(siteId: string, opts: { mode?: IdentityMode; rotateSecret?: boolean }) {
      await mustFindSite(siteId);
      if (opts.mode !== undefined && !IDENTITY_MODES.includes(opts.mode)) throw invalid(`The identity mode is one of ${IDENTITY_MODES.join(', ')}.`);
      const current = await windowSettings(siteId);
      const mode = opts.mode ?? current.mode;
      let secret: string | null = null;
      let sealed = current.sealed;
      if (opts.rotateSecret || (mode !== 'off' && sealed === null)) {
        secret = IDENTITY_SECRET_PREFIX + randomBase62(32);
        sealed = encrypt(sealKey(), secret);
      }
      await store.saveWindowSettings({ site_id: siteId, identity_mode: mode, identity_secret_encrypted: sealed, updated_at: now() });
      return { identityMode: mode, identitySecretSet: sealed !== null, ...(secret ? { identitySecret: secret } : {}) };
    },

    /**
     * What a window request may do, from the one read it makes: whether `origin` is allowed, the
     * identity mode, the generation of the identity secret (a fingerprint of the sealed secret: it
     * changes with every rotation and tells nothing about the secret), and the time at or before
     * which the visitor's credentials and sessions are void (null: none). The secret is opened only
     * when asked for (the gateway checking a hash). Null when there is no such site.
     */
    async windowAccess(siteId: string, origin: string, visitorId: string) {
      const row = await store.findWindowAccess(siteId, origin, visitorId);
      if (!row) return null;
      const sealed = row.identity_secret_encrypted;
      const revoked = [row.site_revoked_before, row.visitor_revoked_before].filter((t): t is number => t !== null);
      return {
        originAllowed: row.allowed_origin !== null,
        identityMode: row.identity_mode ?? ('off' as IdentityMode),
        identityGeneration: sealed === null ? null : sha256Hex(sealed).slice(0, 16),
        revokedBefore: revoked.length ? Math.max(...revoked) : null,
        identitySecret: () => (sealed === null ? null : decrypt(sealKey(), sealed)),
      };
    },

    /**
     * Voids a visitor's window credentials and current sessions (`visitorId`), or every visitor's
     * of the site (null): each is refused at its next request. A visitor may start again as a new
     * one; a verified visitor whose page vouches for it again starts a new session.
     */
    async revokeVisitors(siteId: string, visitorId: string | null) {
      await mustFindSite(siteId);
      if (visitorId !== null && !VISITOR_ID.test(visitorId)) throw invalid('A visitor id is 1 to 128 printable ASCII characters without spaces.');
      const at = now();
      if (visitorId === null) await store.revokeAllVisitors(siteId, at);
      else await store.revokeVisitor(siteId, visitorId, at);
      const after = await store.findWindowAccess(siteId, '', visitorId ?? '');
      const revokedBefore = (visitorId === null ? after?.site_revoked_before : after?.visitor_revoked_before) ?? at;
      return { siteId, visitorId, revokedBefore: toIsoRequired(revokedBefore) };
    },

    isOriginAllowed: (siteId: string, origin: string) => store.isOriginAllowed(siteId, origin),
    /** The site's allowed origins (for the window document's `frame-ancestors`). */
    allowedOrigins: (siteId: string) => store.listOrigins(siteId),

    hasSites: async () => (await store.countSites()) > 0,

    /** Issues a key: the secret is returned once and only its SHA-256 fingerprint is stored. */
    async createKey(siteId: string, scopes: Scope[], label?: string) {
      await mustFindSite(siteId);
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
      if (!row) throw new ApiError('not_found', `Key ${id} not found.`);
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
      if (row.last_used_at === null || row.last_used_at < at - 60_000) await store.touchKey(row.id, at);
      return { keyId: row.id, siteId: row.site_id, scopes: row.scopes.split(',') as Scope[] };
    },
  };
}

export type AccessService = ReturnType<typeof createAccessService>;
