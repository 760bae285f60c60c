import { newId } from '../platform/ids';
import { decrypt, encrypt, randomBase62, safeEqual, sha256Hex } from '../platform/crypto';
import { VISITOR_ID } from '../window/service';
import { ApiError, invalid } from '../platform/errors';
import { toIsoRequired } from '../platform/time';
import type { Scope } from './scopes';
import { runInTransaction } from '../db/transaction';
import type { Knex } from 'knex';
import { AccessStore, IdentityMode, keyToDto, SiteRow } from './store';

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

/**
 * More work for the transaction of a change: the management API writes its audit entry (and a new
 * site's first owner) there, so the log never names a change that did not commit.
 */
export type AlsoInTransaction = (trx: Knex.Transaction, objectId: string, siteId: string) => Promise<unknown>;

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
  async function windowSettings(siteId: string, trx?: Knex) {
    const row = await store.findWindowSettings(siteId, trx);
    return { mode: (row?.identity_mode ?? 'off') as IdentityMode, sealed: row?.identity_secret_encrypted ?? null };
  }
  const checkName = (name: string) => {
    const trimmed = name.trim();
    if (!trimmed || trimmed.length > 200) throw invalid('A site name is 1 to 200 characters.');
    return trimmed;
  };
  const checkMode = (mode: IdentityMode | undefined) => {
    if (mode !== undefined && !IDENTITY_MODES.includes(mode)) throw invalid(`The identity mode is one of ${IDENTITY_MODES.join(', ')}.`);
  };
  /** The identity mode and secret change inside the caller's transaction (see setIdentity). */
  async function applyIdentity(trx: Knex.Transaction, siteId: string, opts: { mode?: IdentityMode; rotateSecret?: boolean }) {
    const current = await windowSettings(siteId, trx);
    const mode = opts.mode ?? current.mode;
    let secret: string | null = null;
    let sealed = current.sealed;
    if (opts.rotateSecret || (mode !== 'off' && sealed === null)) {
      secret = IDENTITY_SECRET_PREFIX + randomBase62(32);
      sealed = encrypt(sealKey(), secret);
    }
    await store.saveWindowSettings({ site_id: siteId, identity_mode: mode, identity_secret_encrypted: sealed, updated_at: now() }, trx);
    return { identityMode: mode, identitySecretSet: sealed !== null, ...(secret ? { identitySecret: secret } : {}) };
  }
  /** A site with its chat window settings (never the identity secret itself). */
  async function siteWithSettings(s: SiteRow) {
    const settings = await windowSettings(s.id);
    return {
      id: s.id,
      name: s.name,
      createdAt: toIsoRequired(s.created_at),
      allowedOrigins: await store.listOrigins(s.id),
      identityMode: settings.mode,
      identitySecretSet: settings.sealed !== null,
    };
  }
  /**
   * Changes the site's allowed origins from the list as it is inside the transaction (so two
   * owners adding one each at once both keep theirs); each normalised, duplicates dropped.
   */
  async function changeAllowedOrigins(siteId: string, change: (current: string[]) => string[], also?: AlsoInTransaction) {
    await mustFindSite(siteId);
    return runInTransaction(store.db, async (trx) => {
      const list = [...new Set(change(await store.listOrigins(siteId, trx)).map(normaliseOrigin))];
      if (list.length > MAX_ALLOWED_ORIGINS) throw invalid(`At most ${MAX_ALLOWED_ORIGINS} allowed origins per site.`);
      await store.replaceOrigins(siteId, list, trx);
      await also?.(trx, siteId, siteId);
      return store.listOrigins(siteId, trx);
    });
  }
  return {
    async createSite(name: string, also?: AlsoInTransaction) {
      const row = { id: newId('ws'), name: checkName(name), created_at: now() };
      await runInTransaction(store.db, async (trx) => {
        await store.insertSite(row, trx);
        await also?.(trx, row.id, row.id);
      });
      return { id: row.id, name: row.name };
    },

    /** Every site with its chat window settings (never the identity secret itself). */
    async listSites() {
      return Promise.all((await store.listSites()).map(siteWithSettings));
    },

    /** One site with its chat window settings, or 404. */
    async getSite(siteId: string) {
      const row = await store.findSite(siteId);
      if (!row) throw new ApiError('not_found', `Site ${siteId} not found.`);
      return siteWithSettings(row);
    },

    /** Replaces the site's allowed origins (each normalised; duplicates dropped). */
    setAllowedOrigins: (siteId: string, origins: string[], also?: AlsoInTransaction) => changeAllowedOrigins(siteId, () => origins, also),
    changeAllowedOrigins,

    /**
     * Sets the identity-verification mode, making a secret when the site has none (or when asked
     * to rotate). The secret is returned only then, once; afterwards only `identitySecretSet` shows.
     */
    async setIdentity(siteId: string, opts: { mode?: IdentityMode; rotateSecret?: boolean }, also?: AlsoInTransaction) {
      await mustFindSite(siteId);
      checkMode(opts.mode);
      return runInTransaction(store.db, async (trx) => {
        const r = await applyIdentity(trx, siteId, opts);
        await also?.(trx, siteId, siteId);
        return r;
      });
    },

    /**
     * Renames the site and/or sets its identity mode in one transaction: both change or neither
     * (a rename is never left behind by a failed mode change). `identitySecret` as in setIdentity.
     */
    async updateSite(siteId: string, change: { name?: string; identityMode?: IdentityMode }, also?: AlsoInTransaction) {
      await mustFindSite(siteId);
      const name = change.name === undefined ? undefined : checkName(change.name);
      checkMode(change.identityMode);
      return runInTransaction(store.db, async (trx) => {
        if (name !== undefined) await store.renameSite(siteId, name, trx);
        const identity = change.identityMode === undefined ? undefined : await applyIdentity(trx, siteId, { mode: change.identityMode });
        await also?.(trx, siteId, siteId);
        return { identitySecret: identity?.identitySecret };
      });
    },

    /** Whether the site's chat window shows agents' names on their replies (server/window/authors.ts), or 404. */
    async agentNames(siteId: string) {
      const naming = await store.findReplyNaming(siteId);
      if (!naming) throw new ApiError('not_found', `Site ${siteId} not found.`);
      return { shown: naming.agentNames };
    },

    /** Shows (true) or hides agents' names in the site's chat window; the window's next answers follow. */
    async setAgentNames(siteId: string, shown: boolean, also?: AlsoInTransaction) {
      await mustFindSite(siteId);
      await runInTransaction(store.db, async (trx) => {
        await store.setAgentNames(siteId, shown, now(), trx);
        await also?.(trx, siteId, siteId);
      });
      return { shown };
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

    /**
     * Issues a key: the secret is returned once and only its SHA-256 fingerprint is stored.
     * `createdBy` names the account issuing it through the management API (the CLI: none).
     */
    async createKey(siteId: string, scopes: Scope[], label?: string, opts: { createdBy?: string; also?: AlsoInTransaction } = {}) {
      await mustFindSite(siteId);
      if (scopes.length === 0) throw invalid('A key needs at least one right.');
      const key = KEY_PREFIX + randomBase62(32);
      const row = {
        id: newId('key'),
        site_id: siteId,
        fingerprint: sha256Hex(key),
        display_prefix: key.slice(0, 12),
        scopes: scopes.join(','),
        label: label ?? null,
        created_by: opts.createdBy ?? null,
        created_at: now(),
        revoked_at: null,
        last_used_at: null,
      };
      await runInTransaction(store.db, async (trx) => {
        await store.insertKey(row, trx);
        await opts.also?.(trx, row.id, siteId);
      });
      return { id: row.id, key, scopes: [...scopes] };
    },

    async listKeys(siteId: string) {
      return (await store.listKeys(siteId)).map(keyToDto);
    },

    /** One key of the site (never its value), or 404 when it is missing or another site's. */
    async getKey(siteId: string, id: string) {
      const row = await store.findKey(id);
      if (!row || row.site_id !== siteId) throw new ApiError('not_found', `Key ${id} not found.`);
      return keyToDto(row);
    },

    /** `limit` keys of the site after `after` (a decoded cursor), oldest first, and whether more follow. */
    async listKeysPage(siteId: string, limit: number, after?: { createdAt: number; id: string }) {
      await mustFindSite(siteId);
      return store.listKeysPage(siteId, limit, after);
    },

    /**
     * Revokes a key; it is refused from the next request on. With `siteId`, a key of another site
     * is 404 like a missing one. `also` runs only when this call revoked it (not when it already was).
     */
    async revokeKey(id: string, opts: { siteId?: string; also?: AlsoInTransaction } = {}) {
      const found = await store.findKey(id);
      if (!found || (opts.siteId !== undefined && found.site_id !== opts.siteId)) throw new ApiError('not_found', `Key ${id} not found.`);
      await runInTransaction(store.db, async (trx) => {
        if (Number(await store.revokeKey(id, now(), trx)) > 0) await opts.also?.(trx, id, found.site_id);
      });
      const row = (await store.findKey(id))!;
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
