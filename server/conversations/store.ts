import type { Knex } from 'knex';
import { forUpdate } from '../db/knex';
import type { Position } from '../platform/cursor';
import { toIso, toIsoRequired } from '../platform/time';
import type { components } from '../generated/api';

export type Conversation = components['schemas']['Conversation'];
export type ConversationState = components['schemas']['ConversationState'];

export interface ConversationRow {
  id: string;
  site_id: string;
  visitor_id: string;
  state: ConversationState;
  open_marker: number | null;
  created_at: number;
  updated_at: number;
  last_message_at: number | null;
  closed_at: number | null;
}

export interface ConversationFilters {
  state?: ConversationState;
  createdAfter?: number;
  createdBefore?: number;
  updatedAfter?: number;
  updatedBefore?: number;
}

export function conversationToDto(row: ConversationRow): Conversation {
  return {
    id: row.id,
    state: row.state,
    visitorId: row.visitor_id,
    createdAt: toIsoRequired(row.created_at),
    updatedAt: toIsoRequired(row.updated_at),
    lastMessageAt: toIso(row.last_message_at),
    closedAt: toIso(row.closed_at),
  };
}

/** The one row mapping of `conversations`: driver differences normalised (mysql2 may hand BIGINT back as string). */
export function mapConversationRow(row: ConversationRow): ConversationRow {
  return {
    ...row,
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
    last_message_at: row.last_message_at === null ? null : Number(row.last_message_at),
    closed_at: row.closed_at === null ? null : Number(row.closed_at),
  };
}

const normalise = (row: ConversationRow | undefined) => row && mapConversationRow(row);

export function createConversationStore(db: Knex) {
  return {
    async find(siteId: string, id: string, trx: Knex = db): Promise<ConversationRow | undefined> {
      return normalise(await trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first());
    },

    async findForUpdate(trx: Knex.Transaction, siteId: string, id: string) {
      return normalise(await forUpdate(trx, trx<ConversationRow>('conversations').where({ site_id: siteId, id }).first()));
    },

    async findById(id: string, trx: Knex = db) {
      return normalise(await trx<ConversationRow>('conversations').where({ id }).first());
    },

    /**
     * The visitor's open conversation, locked. Found with a plain read first and then locked by
     * primary key: a locking read of a row that does not exist yet would take a gap lock on
     * MySQL, and two first messages of different visitors would deadlock on their inserts. The
     * row may have been closed between the two reads, hence the state check.
     */
    async findOpenForVisitor(trx: Knex.Transaction, siteId: string, visitorId: string) {
      const seen = await trx<ConversationRow>('conversations').where({ site_id: siteId, visitor_id: visitorId, open_marker: 1 }).first('id');
      if (!seen) return undefined;
      const locked = normalise(await forUpdate(trx, trx<ConversationRow>('conversations').where({ id: seen.id }).first()));
      return locked && locked.state === 'open' ? locked : undefined;
    },

    insert: (trx: Knex.Transaction, row: ConversationRow) => trx('conversations').insert(row),

    touch: (trx: Knex.Transaction, id: string, at: number) =>
      trx('conversations').where({ id }).update({ updated_at: at, last_message_at: at }),

    /** Closes only an open conversation; answers whether this call did it (so one close emits one event). */
    async close(trx: Knex.Transaction, id: string, at: number): Promise<boolean> {
      const n = await trx('conversations')
        .where({ id, state: 'open' })
        .update({ state: 'closed', open_marker: null, closed_at: at, updated_at: at });
      return Number(n) === 1;
    },

    /** Newest first by (created_at, id); a keyset range scan on conversations_site_state_created / _site_created. */
    async list(siteId: string, filters: ConversationFilters, after: Position | undefined, limit: number) {
      const q = db<ConversationRow>('conversations').where('site_id', siteId);
      if (filters.state) q.andWhere('state', filters.state);
      if (filters.createdAfter !== undefined) q.andWhere('created_at', '>=', filters.createdAfter);
      if (filters.createdBefore !== undefined) q.andWhere('created_at', '<', filters.createdBefore);
      if (filters.updatedAfter !== undefined) q.andWhere('updated_at', '>=', filters.updatedAfter);
      if (filters.updatedBefore !== undefined) q.andWhere('updated_at', '<', filters.updatedBefore);
      if (after) {
        // Written as a range on created_at plus a tie-break, which both engines turn into an index range.
        q.andWhere('created_at', '<=', after.createdAt).andWhere((w) =>
          w.where('created_at', '<', after.createdAt).orWhere('id', '<', after.id),
        );
      }
      const rows = await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
      return rows.map((r) => normalise(r)!);
    },
  };
}

export type ConversationStore = ReturnType<typeof createConversationStore>;
