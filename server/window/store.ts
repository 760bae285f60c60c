import type { Knex } from 'knex';
import { mapConversationRow, type ConversationRow } from '../conversations/store';
import { MESSAGE_COLUMNS, mapMessageRow, MessageRow } from '../messages/store';

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

/** The chat window's reads and writes beyond what the conversation and message stores have. */
export function createWindowStore(db: Knex) {
  return {
    findClientMessage: (trx: Knex, siteId: string, visitorId: string, clientMessageId: string) =>
      trx<ClientMessageRow>('window_client_messages').where({ site_id: siteId, visitor_id: visitorId, client_message_id: clientMessageId }).first(),

    /** Fails with a unique violation when the visitor already used this client id (a concurrent resend). */
    insertClientMessage: (trx: Knex.Transaction, row: ClientMessageRow) => trx('window_client_messages').insert(row),

    async findMessage(id: string): Promise<MessageRow | undefined> {
      const r: MessageRow | undefined = await db('messages').where({ id }).first(MESSAGE_COLUMNS);
      return r && mapMessageRow(r);
    },

    /** The visitor's newest conversation (open, or the last one closed). */
    async latestConversation(siteId: string, visitorId: string): Promise<ConversationRow | undefined> {
      const r = await db<ConversationRow>('conversations')
        .where({ site_id: siteId, visitor_id: visitorId })
        .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
        .first();
      return r && mapConversationRow(r);
    },

    /** The visitor's conversation that started after `after` (or its first one). */
    async nextConversation(siteId: string, visitorId: string, after: { created_at: number; id: string } | null): Promise<ConversationRow | undefined> {
      const q = db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId });
      if (after) {
        q.andWhere('created_at', '>=', after.created_at).andWhere((w) => w.where('created_at', '>', after.created_at).orWhere('id', '>', after.id));
      }
      const r = await q.orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]).first();
      return r && mapConversationRow(r);
    },

    async conversationOfVisitor(siteId: string, visitorId: string, id: string): Promise<ConversationRow | undefined> {
      const r = await db<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId, id }).first();
      return r && mapConversationRow(r);
    },

    /**
     * Messages of a conversation from `createdAt` on (inclusive: messages written in the same
     * millisecond as the last one delivered may sort before it by id), oldest first.
     */
    async messagesFrom(conversationId: string, createdAt: number, limit: number): Promise<MessageRow[]> {
      const rows: MessageRow[] = await db('messages')
        .where('conversation_id', conversationId)
        .andWhere('created_at', '>=', createdAt)
        .orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }])
        .limit(limit)
        .select(MESSAGE_COLUMNS);
      return rows.map(mapMessageRow);
    },

    /** Newest message time of a conversation and every message id written at that millisecond. */
    async tailOf(conversationId: string): Promise<{ createdAt: number; ids: string[] } | null> {
      const last = await db<MessageRow>('messages').where('conversation_id', conversationId).max({ t: 'created_at' }).first();
      const t = last?.t === null || last?.t === undefined ? null : Number(last.t);
      if (t === null) return null;
      const ids = await db<MessageRow>('messages').where({ conversation_id: conversationId, created_at: t }).orderBy('id').pluck('id');
      return { createdAt: t, ids };
    },

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
