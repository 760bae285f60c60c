import type { SearchIndex } from '../search/service';
import type { Knex } from 'knex';
import { invalid, notFound } from '../platform/errors';
import { toIso, toIsoRequired } from '../platform/time';
import { runInTransaction } from '../db/transaction';
import type { AuditActor, AuditLog } from '../accounts/audit';
import type { ConversationRow, ConversationStore } from '../conversations/store';
import type { InboxRecorder } from '../inbox/activity';
import type { VisitorStore } from './store';
import { visitorDisplayName } from './display-name';
import { replyEmailState } from './reply-email-rules';
import type { VisitorContextStore, ContextSettings } from './context-store';
import { EMAIL, type IdentityClaims } from './identity-token';
import {
  checkAttributes,
  checkLanguage,
  checkTimeZone,
  cleanText,
  currentVisit,
  keptUrl,
  MAX_TITLE_LENGTH,
  parseUserAgent,
  type Attribute,
  type AttributeValue,
} from './context-rules';

/** The inbox feed's kind for "the visitor's context or details changed" (streamInbox in openapi/manage.yaml). */
export const VISITOR_CONTEXT_EVENT = 'visitor.context';
/** A visitor keeps at most this many custom attributes, verified and not together. */
export const MAX_ATTRIBUTES_PER_VISITOR = 50;
/** What tells one environment from another (its time aside). */
const ENVIRONMENT_FIELDS = ['language', 'time_zone', 'browser', 'browser_version', 'os', 'os_version', 'device'] as const;
/** Earlier conversations the side panel lists. */
const EARLIER_CONVERSATIONS = 10;

export interface ContextReport {
  page: { url: string; title?: string; referrer?: string };
  language?: string;
  timeZone?: string;
}

export interface VisitorDetails {
  name?: string;
  email?: string;
  attributes?: Record<string, AttributeValue>;
}

/**
 * The visitor in context (issue 25, item 3): what the chat window reports about where its visitor
 * is and what the visitor (or the site's server) says of itself, the site's setting that turns
 * page tracking off, and the inbox's side panel that shows it all. Reports are kept only for a
 * visitor's open conversation, and only while the site tracks pages; a stored change is a row of
 * the site's inbox feed, so an agent's panel follows the visitor live.
 */
export function createVisitorContext(deps: {
  db: Knex;
  store: VisitorContextStore;
  visitors: VisitorStore;
  conversations: Pick<ConversationStore, 'find' | 'latestOfVisitor' | 'nextOfVisitor' | 'ofVisitor'>;
  record: InboxRecorder;
  audit: AuditLog['record'];
  /** The inbox's search finds a visitor's conversations by its name and email: rewritten with them. */
  search: Pick<SearchIndex, 'visitorChanged'>;
  now: () => number;
}) {
  const { db, store, now } = deps;

  /** The visitor's conversation a report belongs to: its newest, if open. */
  async function openConversation(siteId: string, visitorId: string): Promise<ConversationRow | undefined> {
    const latest = await deps.conversations.latestOfVisitor(siteId, visitorId);
    return latest?.state === 'open' ? latest : undefined;
  }

  const notify = (trx: Knex.Transaction, c: ConversationRow, at: number) =>
    deps.record(trx, {
      siteId: c.site_id,
      visitorId: c.visitor_id,
      kind: VISITOR_CONTEXT_EVENT,
      conversationId: c.id,
      accountId: null,
      body: { conversationId: c.id, visitorId: c.visitor_id, changedAt: toIsoRequired(at) },
    });

  function checkDetails(details: VisitorDetails) {
    const name = details.name === undefined ? undefined : cleanText(details.name, 200) || null;
    if (details.email !== undefined && !EMAIL.test(details.email)) {
      throw invalid('The email is not an email address.', [{ path: '/body/email', message: 'must be an email address' }]);
    }
    return { name, email: details.email, attributes: checkAttributes(details.attributes, '/body/attributes') };
  }

  /** Name, email and attributes of a visitor in `trx`, each verified or not (see VisitorStore.record and setAttributes). */
  async function recordDetails(
    trx: Knex.Transaction,
    siteId: string,
    visitorId: string,
    d: { name?: string | null; email?: string; attributes: Attribute[] },
    verified: boolean,
    at: number,
  ) {
    if (d.name !== undefined || d.email !== undefined) {
      await deps.visitors.record(siteId, visitorId, { name: d.name, email: d.email, verified }, at, trx);
      await deps.search.visitorChanged(trx, siteId, visitorId);
    }
    await store.setAttributes(trx, siteId, visitorId, d.attributes, verified, at, MAX_ATTRIBUTES_PER_VISITOR);
  }

  return {
    settings: async (siteId: string): Promise<ContextSettings> => store.settings(siteId),

    /** An owner's change of the setting (a field left out stays); audited as `site.visitor_context_changed`. */
    async updateSettings(actor: AuditActor, siteId: string, change: Partial<ContextSettings>): Promise<ContextSettings> {
      return runInTransaction(db, async (trx) => {
        const next = { ...(await store.settings(siteId, trx)), ...change };
        await store.saveSettings(trx, siteId, next, now());
        await deps.audit(actor, [siteId], 'site.visitor_context_changed', siteId, trx);
        return next;
      });
    },

    /**
     * A report of the window: the page its visitor is on, and its browser's language, time zone
     * and user agent. Kept only while the site tracks pages and the visitor has an open
     * conversation; the page's address must be on the origin the window token was issued to, and
     * is kept without its fragment (and its query, unless the site keeps it). A reload of the page
     * already shown last is not a new page. Answers whether anything was kept, and the setting,
     * so the window stops reporting when tracking is off.
     */
    async report(siteId: string, visitorId: string, origin: string, report: ContextReport, userAgent: string | undefined) {
      const settings = await store.settings(siteId);
      const answer = (stored: boolean) => ({ stored, pageTracking: settings.pageTracking, keepQuery: settings.keepQuery });
      if (!settings.pageTracking) return answer(false);
      const url = keptUrl(report.page.url, settings.keepQuery);
      if (url === null || new URL(url).origin !== origin) {
        throw invalid("The page must be an http(s) address on the window's own origin.", [{ path: '/body/page/url', message: 'not a page of this origin' }]);
      }
      const conversation = await openConversation(siteId, visitorId);
      if (!conversation) return answer(false);
      const at = now();
      const page = {
        url,
        title: report.page.title === undefined ? null : cleanText(report.page.title, MAX_TITLE_LENGTH) || null,
        referrer: keptUrl(report.page.referrer, settings.keepQuery),
        viewedAt: at,
      };
      const agent = parseUserAgent(userAgent);
      const environment = {
        conversation_id: conversation.id,
        site_id: siteId,
        language: checkLanguage(report.language),
        time_zone: checkTimeZone(report.timeZone),
        browser: agent.browser,
        browser_version: agent.browserVersion,
        os: agent.os,
        os_version: agent.osVersion,
        device: agent.device,
        reported_at: at,
      };
      await runInTransaction(db, async (trx) => {
        const last = await store.lastPage(conversation.id, trx);
        const before = await store.environment(conversation.id, trx);
        await store.saveEnvironment(trx, environment);
        const samePage = last !== undefined && last.url === page.url && last.title === page.title;
        if (!samePage) await store.addPage(trx, siteId, conversation.id, page);
        const sameEnvironment = before !== undefined && ENVIRONMENT_FIELDS.every((k) => before[k] === environment[k]);
        if (!samePage || !sameEnvironment) await notify(trx, conversation, at);
      });
      return answer(true);
    },

    /**
     * What a page says of its visitor without the site's server vouching for it: a name, an email,
     * attributes, all kept as unverified (never over what an identity token verified).
     * `replyEmails`: the visitor itself asked, in the window's away form, to be told of replies by
     * email (its consent, see reply-emails.ts).
     */
    async updateDetails(siteId: string, visitorId: string, details: VisitorDetails, opts: { replyEmails?: boolean } = {}): Promise<{ stored: boolean }> {
      const checked = checkDetails(details);
      const at = now();
      const conversation = await openConversation(siteId, visitorId);
      await runInTransaction(db, async (trx) => {
        await recordDetails(trx, siteId, visitorId, checked, false, at);
        if (opts.replyEmails) await deps.visitors.subscribeReplyEmails(trx, siteId, visitorId, at);
        if (conversation) await notify(trx, conversation, at);
      });
      return { stored: true };
    },

    /** The identity a verified token carried (the gateway, after its check): name, email and attributes, verified. */
    async recordIdentity(siteId: string, visitorId: string, claims: IdentityClaims): Promise<void> {
      if (claims.name === undefined && claims.email === undefined && !claims.attributes.length) return;
      const at = now();
      await runInTransaction(db, (trx) =>
        recordDetails(trx, siteId, visitorId, { name: claims.name, email: claims.email, attributes: claims.attributes }, true, at),
      );
    },

    /** The inbox's side panel for a conversation of the site (member role, checked by the entry). */
    async panel(siteId: string, conversationId: string) {
      const c = await deps.conversations.find(siteId, conversationId);
      if (!c) throw notFound('Conversation');
      const v = c.visitor_id;
      const [profile, settings, environment, pages, attributes, recent, first] = await Promise.all([
        deps.visitors.find(siteId, v),
        store.settings(siteId),
        store.environment(c.id),
        store.pages(c.id),
        store.attributes(siteId, v),
        deps.conversations.ofVisitor(siteId, v, EARLIER_CONVERSATIONS + 1),
        deps.conversations.nextOfVisitor(siteId, v, null),
      ]);
      const display = visitorDisplayName(v, profile);
      const others = recent.filter((r) => r.id !== c.id);
      const visit = currentVisit(pages);
      const seen = [profile?.lastSeenAt, environment?.reported_at, pages.at(-1)?.viewedAt, c.last_message_at, c.created_at].filter(
        (t): t is number => typeof t === 'number',
      );
      return {
        visitorId: v,
        identityVerified: v.startsWith('user:'),
        displayName: display.name,
        nameSource: display.source,
        name: profile?.name ?? null,
        nameVerified: profile?.nameVerified ?? false,
        email: profile?.email ?? null,
        emailVerified: profile?.emailVerified ?? false,
        replyEmails: replyEmailState(profile),
        firstSeenAt: toIsoRequired(Math.min(profile?.firstSeenAt ?? Infinity, first?.created_at ?? c.created_at)),
        lastSeenAt: toIsoRequired(Math.max(...seen)),
        pageTracking: settings.pageTracking,
        pages: visit.map((p) => ({
          url: p.url,
          title: p.title,
          referrer: p.referrer,
          viewedAt: toIsoRequired(p.viewedAt),
          durationSeconds: p.durationMs === null ? null : Math.round(p.durationMs / 1000),
        })),
        pagesInConversation: pages.length,
        environment: environment
          ? {
              browser: environment.browser,
              browserVersion: environment.browser_version,
              os: environment.os,
              osVersion: environment.os_version,
              device: environment.device,
              language: environment.language,
              timeZone: environment.time_zone,
              reportedAt: toIsoRequired(environment.reported_at),
            }
          : null,
        attributes: attributes.map((a) => ({ name: a.name, value: a.value, verified: a.verified, updatedAt: toIsoRequired(a.updatedAt) })),
        conversations: others.slice(0, EARLIER_CONVERSATIONS).map((r) => ({
          id: r.id,
          state: r.state,
          createdAt: toIsoRequired(r.created_at),
          lastMessageAt: toIso(r.last_message_at),
        })),
        moreConversations: others.length > EARLIER_CONVERSATIONS,
      };
    },

    /** Maintenance: context older than the retention, in batches; answers how much went. */
    async purge(before: number): Promise<number> {
      let removed = 0;
      for (;;) {
        const n = await store.removeOlderThan(before);
        removed += n;
        if (n === 0) return removed;
      }
    },
  };
}

export type VisitorContext = ReturnType<typeof createVisitorContext>;
