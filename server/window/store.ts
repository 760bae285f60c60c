import type { Knex } from 'knex';

export interface ClientMessageRow {
  site_id: string;
  visitor_id: string;
  client_message_id: string;
  message_id: string;
  request_hash: string;
  created_at: number;
}

/** Lists cut to a size every engine takes as bound parameters of one statement. */
function chunks<T>(items: T[], size = 500): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The chat window's own table (the client message ids of visitors' sends) and its reads of the
 * events for the live hub. Conversations and messages are read through their own stores.
 */
export function createWindowStore(db: Knex) {
  return {
    findClientMessage: (trx: Knex, siteId: string, visitorId: string, clientMessageId: string) =>
      trx<ClientMessageRow>('window_client_messages').where({ site_id: siteId, visitor_id: visitorId, client_message_id: clientMessageId }).first(),

    /** Fails with a unique violation when the visitor already used this client id (a concurrent resend). */
    insertClientMessage: (trx: Knex.Transaction, row: ClientMessageRow) => trx('window_client_messages').insert(row),

    /**
     * Per site, how many events were written since `since` and the newest one's time: the live hub
     * compares this with the events it already knows, so a poll that finds nothing new reads no rows.
     * `siteIds` null asks across all sites (a long list of watched sites would make a long statement).
     */
    async recentEventCounts(siteIds: string[] | null, since: number): Promise<Map<string, { count: number; newest: number }>> {
      const out = new Map<string, { count: number; newest: number }>();
      if (siteIds && !siteIds.length) return out;
      const q = db('events').where('created_at', '>=', since);
      if (siteIds) q.whereIn('site_id', siteIds);
      const rows = await q.groupBy('site_id').select('site_id', db.raw('count(*) as n'), db.raw('max(created_at) as m'));
      for (const r of rows as { site_id: string; n: unknown; m: unknown }[]) out.set(r.site_id, { count: Number(r.n), newest: Number(r.m) });
      return out;
    },

    /** The ids and times of the events of these sites written since `since` (the hub's look-back window). */
    async recentEvents(siteIds: string[], since: number): Promise<{ id: string; siteId: string; createdAt: number }[]> {
      const out: { id: string; siteId: string; createdAt: number }[] = [];
      for (const sites of chunks(siteIds)) {
        const rows: { id: string; site_id: string; created_at: unknown }[] = await db('events').whereIn('site_id', sites).andWhere('created_at', '>=', since).select('id', 'site_id', 'created_at');
        for (const r of rows) out.push({ id: r.id, siteId: r.site_id, createdAt: Number(r.created_at) });
      }
      return out;
    },

    /**
     * The visitor of each event, from the conversation in its body; null when the body cannot say
     * (its reader then wakes every stream of the site rather than miss one).
     */
    async visitorsOfEvents(ids: string[]): Promise<Map<string, string | null>> {
      const out = new Map<string, string | null>();
      for (const some of chunks(ids)) {
        const rows: { id: string; body: string }[] = await db('events').whereIn('id', some).select('id', 'body');
        for (const r of rows) {
          let visitor: unknown;
          try {
            visitor = JSON.parse(r.body)?.data?.conversation?.visitorId;
          } catch {
            visitor = undefined;
          }
          out.set(r.id, typeof visitor === 'string' ? visitor : null);
        }
      }
      return out;
    },
  };
}

export type WindowStore = ReturnType<typeof createWindowStore>;
