import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';
import type { StoreContract } from '../db/store-contract';
import { decodeAttribute, encodeAttribute, MAX_PAGES_PER_CONVERSATION, type Attribute, type AttributeValue, type PageView } from './context-rules';

/**
 * The visitor's context (023_visitor_context.ts): the site's setting, each conversation's browser
 * environment and pages, and the visitors' custom attributes. The only writer of these four tables;
 * each has its one row mapping here.
 */

export interface ContextSettings {
  pageTracking: boolean;
  keepQuery: boolean;
}
export const DEFAULT_CONTEXT_SETTINGS: ContextSettings = { pageTracking: true, keepQuery: false };

export interface EnvironmentRow {
  conversation_id: string;
  site_id: string;
  language: string | null;
  time_zone: string | null;
  browser: string | null;
  browser_version: string | null;
  os: string | null;
  os_version: string | null;
  device: string | null;
  reported_at: number;
}

export interface StoredAttribute extends Attribute {
  verified: boolean;
  updatedAt: number;
}

interface PageRow {
  id: number;
  conversation_id: string;
  url: string;
  title: string | null;
  referrer: string | null;
  viewed_at: number;
}

const ENVIRONMENT_COLUMNS = [
  'conversation_id',
  'site_id',
  'language',
  'time_zone',
  'browser',
  'browser_version',
  'os',
  'os_version',
  'device',
  'reported_at',
] as const;
const mapEnvironment = (row: EnvironmentRow): EnvironmentRow => withNumericColumns(row, ['reported_at']);
const mapPage = (row: PageRow): PageView & { conversationId: string } => {
  const r = withNumericColumns(row, ['viewed_at']);
  return { conversationId: r.conversation_id, url: r.url, title: r.title, referrer: r.referrer, viewedAt: r.viewed_at };
};

/** How many rows a retention or deletion statement removes at most: each is a short transaction. */
export const REMOVAL_BATCH = 500;

export function createVisitorContextStore(db: Knex) {
  return {
    db,

    /** The site's setting (a site never set: pages tracked, queries stripped). */
    async settings(siteId: string, trx: Knex = db): Promise<ContextSettings> {
      const row = await trx('visitor_context_settings').where({ site_id: siteId }).first('page_tracking', 'keep_query');
      return row ? { pageTracking: Boolean(row.page_tracking), keepQuery: Boolean(row.keep_query) } : { ...DEFAULT_CONTEXT_SETTINGS };
    },

    async saveSettings(trx: Knex.Transaction, siteId: string, settings: ContextSettings, at: number): Promise<void> {
      const row = { site_id: siteId, page_tracking: settings.pageTracking, keep_query: settings.keepQuery, updated_at: at };
      await trx('visitor_context_settings').insert(row).onConflict('site_id').merge(['page_tracking', 'keep_query', 'updated_at']);
    },

    /** What the window last said of the conversation's browser. */
    async environment(conversationId: string, trx: Knex = db): Promise<EnvironmentRow | undefined> {
      const row: EnvironmentRow | undefined = await trx('conversation_environments').where({ conversation_id: conversationId }).first(ENVIRONMENT_COLUMNS);
      return row && mapEnvironment(row);
    },

    async saveEnvironment(trx: Knex.Transaction, row: EnvironmentRow): Promise<void> {
      const { conversation_id: _key, ...changed } = row;
      await trx('conversation_environments')
        .insert(row)
        .onConflict('conversation_id')
        .merge(Object.keys(changed) as (keyof EnvironmentRow)[]);
    },

    /** The conversation's newest page, if any (a reload of it is not a new page). */
    async lastPage(conversationId: string, trx: Knex = db): Promise<(PageView & { conversationId: string }) | undefined> {
      const row: PageRow | undefined = await trx('conversation_pages')
        .where({ conversation_id: conversationId })
        .orderBy([
          { column: 'viewed_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .first('id', 'conversation_id', 'url', 'title', 'referrer', 'viewed_at');
      return row && mapPage(row);
    },

    /**
     * Adds a page, then drops the conversation's pages beyond the newest MAX_PAGES_PER_CONVERSATION.
     * The trim reads at most one row past the cap through the conversation's index, so it costs
     * the same however many pages came before.
     */
    async addPage(trx: Knex.Transaction, siteId: string, conversationId: string, page: PageView): Promise<void> {
      await trx('conversation_pages').insert({
        conversation_id: conversationId,
        site_id: siteId,
        url: page.url,
        title: page.title,
        referrer: page.referrer,
        viewed_at: page.viewedAt,
      });
      const overflow: { id: number }[] = await trx('conversation_pages')
        .where({ conversation_id: conversationId })
        .orderBy([
          { column: 'viewed_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .offset(MAX_PAGES_PER_CONVERSATION)
        .limit(REMOVAL_BATCH)
        .select('id');
      if (overflow.length)
        await trx('conversation_pages')
          .whereIn(
            'id',
            overflow.map((r) => r.id),
          )
          .delete();
    },

    /** The conversation's pages (at most MAX_PAGES_PER_CONVERSATION), oldest first. */
    async pages(conversationId: string): Promise<(PageView & { conversationId: string })[]> {
      const rows: PageRow[] = await db('conversation_pages')
        .where({ conversation_id: conversationId })
        .orderBy([
          { column: 'viewed_at', order: 'asc' },
          { column: 'id', order: 'asc' },
        ])
        .limit(MAX_PAGES_PER_CONVERSATION)
        .select('id', 'conversation_id', 'url', 'title', 'referrer', 'viewed_at');
      return rows.map(mapPage);
    },

    async attributes(siteId: string, visitorId: string): Promise<StoredAttribute[]> {
      const rows: { name: string; type: string; value: string; verified: unknown; updated_at: unknown }[] = await db('visitor_attributes')
        .where({ site_id: siteId, visitor_id: visitorId })
        .orderBy('name')
        .select('name', 'type', 'value', 'verified', 'updated_at');
      return rows.map((r) => ({ name: r.name, value: decodeAttribute(r.type, r.value), verified: Boolean(r.verified), updatedAt: Number(r.updated_at) }));
    },

    /**
     * Sets attributes of a visitor. Verified ones replace what is there; an unverified one never
     * replaces a verified one (a page cannot overwrite what the site's server vouched for). A
     * visitor has at most `max` attributes: a new name beyond them is dropped. Answers how many were written.
     */
    async setAttributes(
      trx: Knex.Transaction,
      siteId: string,
      visitorId: string,
      attributes: { name: string; value: AttributeValue }[],
      verified: boolean,
      at: number,
      max: number,
    ): Promise<number> {
      if (!attributes.length) return 0;
      const current: { name: string; verified: unknown }[] = await trx('visitor_attributes')
        .where({ site_id: siteId, visitor_id: visitorId })
        .select('name', 'verified');
      const known = new Map(current.map((r) => [r.name, Boolean(r.verified)]));
      let room = max - known.size;
      let written = 0;
      for (const a of attributes) {
        const wasVerified = known.get(a.name);
        if (wasVerified === undefined) {
          if (room <= 0) continue;
          room--;
        } else if (wasVerified && !verified) continue;
        const row = { site_id: siteId, visitor_id: visitorId, name: a.name, ...encodeAttribute(a.value), verified, updated_at: at };
        // Two first writes of a name at once meet on the primary key; the later one's value wins.
        await trx('visitor_attributes').insert(row).onConflict(['site_id', 'visitor_id', 'name']).merge(['type', 'value', 'verified', 'updated_at']);
        known.set(a.name, verified);
        written++;
      }
      return written;
    },

    /** Deleting a visitor's data: its attributes. */
    removeVisitor: (trx: Knex.Transaction, siteId: string, visitorId: string) =>
      trx('visitor_attributes').where({ site_id: siteId, visitor_id: visitorId }).delete(),

    /** Deleting a visitor's data: the context of these conversations of the site; answers the pages removed. */
    async removeForConversations(trx: Knex.Transaction, siteId: string, conversationIds: string[]): Promise<number> {
      if (!conversationIds.length) return 0;
      await trx('conversation_environments').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete();
      return Number(await trx('conversation_pages').where('site_id', siteId).whereIn('conversation_id', conversationIds).delete());
    },

    /**
     * Retention: pages viewed, and environments last reported, before `before`, up to REMOVAL_BATCH
     * of each; answers how many went (the caller repeats while a batch is full).
     */
    async removeOlderThan(before: number): Promise<number> {
      const pages: { id: number }[] = await db('conversation_pages').where('viewed_at', '<', before).orderBy('viewed_at').limit(REMOVAL_BATCH).select('id');
      let n = 0;
      if (pages.length)
        n += Number(
          await db('conversation_pages')
            .whereIn(
              'id',
              pages.map((p) => p.id),
            )
            .delete(),
        );
      const envs: { conversation_id: string }[] = await db('conversation_environments')
        .where('reported_at', '<', before)
        .orderBy('reported_at')
        .limit(REMOVAL_BATCH)
        .select('conversation_id');
      if (envs.length)
        n += Number(
          await db('conversation_environments')
            .whereIn(
              'conversation_id',
              envs.map((e) => e.conversation_id),
            )
            .delete(),
        );
      return n;
    },
  };
}

export type VisitorContextStore = StoreContract<ReturnType<typeof createVisitorContextStore>>;
