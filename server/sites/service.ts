import type { Knex } from 'knex';
import { ApiError } from '../platform/errors';
import type { CursorCodec } from '../platform/cursor';
import { toPage } from '../platform/cursor';
import type { AccessService, AlsoInTransaction } from '../access/service';
import { normaliseOrigin } from '../access/service';
import { keyToDto } from '../access/store';
import type { IdentityMode } from '../access/store';
import type { Scope } from '../access/scopes';
import { CLI_ACTOR } from '../accounts/common';
import type { Actor, SignedActor } from '../accounts/common';
import type { Members } from '../accounts/members';
import type { AuditLog } from '../accounts/audit';
import type { VisitorFiles } from '../media/visitor-files';

type Owner = SignedActor;

export interface SiteAdminOptions {
  access: AccessService;
  members: Pick<Members, 'addFirstOwner'>;
  audit: AuditLog['record'];
  visitorFiles: VisitorFiles;
  cursors: CursorCodec;
  /** Where the chat window's loader is served (WINDOW_PUBLIC_URL, else PUBLIC_URL). */
  windowUrl: string;
}

/** The `<script>` tag a site's pages embed (docs/window.md, "Embedding the window"). */
export function embedSnippet(windowUrl: string, siteId: string) {
  const scriptUrl = `${windowUrl}/window/v1/loader.js`;
  return { scriptUrl, snippet: `<script async src="${scriptUrl}" data-site="${siteId}"></script>` };
}

/**
 * What an owner does to a site and its access keys through the management API. The management
 * entry has checked the caller's role (`x-role: owner`, server/manage/roles.ts) before any of these
 * runs; each calls the access service the CLI calls too, handing it the audit entry to write in the
 * change's own transaction.
 */
export function createSiteAdmin(opts: SiteAdminOptions) {
  const { access, members, audit, cursors } = opts;
  /** The audit entry of a change, written in its transaction. */
  const audited = (actor: Owner, siteId: string, action: string) => (trx: Knex, objectId: string) => audit(actor, [siteId], action, objectId, trx);

  return {
    /**
     * The audit entries of a change the operator CLI makes with the access service (actor
     * `operator`), written in the change's transaction like the management API's.
     */
    byOperator:
      (...actions: string[]): AlsoInTransaction =>
      async (trx, objectId, siteId) => {
        for (const action of actions) await audit(CLI_ACTOR, [siteId], action, objectId, trx);
      },

    /** Any signed-in account may make a site; it becomes the site's first owner. */
    async createSite(actor: Owner, name: string) {
      const site = await access.createSite(name, async (trx, siteId) => {
        await members.addFirstOwner(actor, siteId, trx);
        await audit(actor, [siteId], 'site.created', siteId, trx);
      });
      return access.getSite(site.id);
    },

    async getSite(siteId: string) {
      return access.getSite(siteId);
    },

    /**
     * Renames the site and/or sets its identity-verification mode. A mode other than `off` makes
     * a secret when the site has none: then, and only then, `identitySecret` is in the answer.
     */
    async updateSite(actor: Owner, siteId: string, change: { name?: string; identityMode?: IdentityMode }) {
      const actions = [
        ...(change.name !== undefined ? ['site.renamed'] : []),
        ...(change.identityMode !== undefined ? [`site.identity_mode_changed.${change.identityMode}`] : []),
      ];
      const { identitySecret } = await access.updateSite(siteId, change, async (trx, objectId) => {
        for (const action of actions) await audit(actor, [siteId], action, objectId, trx);
      });
      const site = await access.getSite(siteId);
      return identitySecret ? { ...site, identitySecret } : site;
    },

    async agentNames(siteId: string) {
      return access.agentNames(siteId);
    },
    /** Agents' names on replies in the chat window on (the default) or off (the site's name instead). */
    async setAgentNames(actor: Owner, siteId: string, shown: boolean) {
      return access.setAgentNames(siteId, shown, audited(actor, siteId, shown ? 'site.agent_names_shown' : 'site.agent_names_hidden'));
    },

    async listOrigins(siteId: string) {
      return (await access.getSite(siteId)).allowedOrigins;
    },
    async replaceOrigins(actor: Owner, siteId: string, origins: string[]) {
      return access.setAllowedOrigins(siteId, origins, audited(actor, siteId, 'site.origins_replaced'));
    },
    async addOrigin(actor: Owner, siteId: string, origin: string) {
      return access.changeAllowedOrigins(siteId, (current) => [...current, origin], audited(actor, siteId, 'site.origin_added'));
    },
    /** Removes one origin (compared as normalised); one the site does not list is 404. */
    async removeOrigin(actor: Owner, siteId: string, origin: string) {
      const gone = normaliseOrigin(origin);
      return access.changeAllowedOrigins(
        siteId,
        (current) => {
          if (!current.includes(gone)) throw new ApiError('not_found', `The site does not allow ${gone}.`);
          return current.filter((o) => o !== gone);
        },
        audited(actor, siteId, 'site.origin_removed'),
      );
    },

    /** A new identity secret, shown once; tokens and sessions vouched for with the old one are refused from now on. */
    async rotateIdentitySecret(actor: Owner, siteId: string) {
      const r = await access.setIdentity(siteId, { rotateSecret: true }, audited(actor, siteId, 'site.identity_secret_rotated'));
      return { identityMode: r.identityMode, identitySecretSet: true as const, identitySecret: r.identitySecret! };
    },

    async embed(siteId: string) {
      const site = await access.getSite(siteId);
      return { siteId, ...embedSnippet(opts.windowUrl, siteId), allowedOrigins: site.allowedOrigins };
    },

    async visitorFiles(siteId: string) {
      return opts.visitorFiles.settings(siteId);
    },
    /** Visitor files on or off and their types (`null`: any type); a field left out is unchanged. */
    async updateVisitorFiles(actor: Owner, siteId: string, change: { enabled?: boolean; types?: string[] | null }) {
      const types = change.types === undefined ? undefined : change.types === null ? '' : change.types.join(',');
      return opts.visitorFiles.update(siteId, { enabled: change.enabled, types }, (trx) => audit(actor, [siteId], 'site.visitor_files_changed', siteId, trx));
    },

    /**
     * Voids one visitor's chat window access (`visitorId`) or every visitor's (null): an owner
     * through the API, or the operator (the CLI's `visitor revoke`). The audit
     * entry follows the revocation (a time moved forward, which a retry repeats harmlessly), not in
     * its transaction: the access store writes it on its own.
     */
    async revokeVisitors(actor: Actor, siteId: string, visitorId: string | null) {
      const r = await access.revokeVisitors(siteId, visitorId);
      await audit(actor, [siteId], visitorId === null ? 'visitor.revoked_all' : 'visitor.revoked', visitorId ?? siteId);
      return r;
    },

    /** A key of the site, issued by the caller's account; its value is in this answer only. */
    async createKey(actor: Owner, siteId: string, label: string, scopes: Scope[]) {
      const created = await access.createKey(siteId, [...new Set(scopes)], label, {
        createdBy: actor.manager.accountId,
        also: audited(actor, siteId, 'key.created'),
      });
      const made = await access.getKey(siteId, created.id);
      return { ...made, label, createdBy: actor.manager.accountId, lastUsedAt: null, revokedAt: null, key: created.key };
    },

    async listKeys(siteId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 25;
      const scope = { list: 'keys', siteId };
      const after = query.cursor ? cursors.decode(query.cursor, scope) : undefined;
      return toPage(await access.listKeysPage(siteId, limit + 1, after), limit, (rows) => rows.map(keyToDto), cursors, scope);
    },

    /** Revokes a key of the site: the public API refuses it from the next request on. Revoking it again changes nothing. */
    async revokeKey(actor: Owner, siteId: string, keyId: string) {
      await access.revokeKey(keyId, { siteId, also: audited(actor, siteId, 'key.revoked') });
      return access.getKey(siteId, keyId);
    },
  };
}

export type SiteAdmin = ReturnType<typeof createSiteAdmin>;
