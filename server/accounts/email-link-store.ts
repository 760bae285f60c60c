import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';

/** The queries of email links (migration 032): `email_links` is read and written here and nowhere else. */
export interface EmailLinkRow {
  id: string;
  account_id: string;
  /** The address the link was sent to: the account's own (to verify it) or a new one (to move to it). */
  email: string;
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

const mapRow = (r: EmailLinkRow) => withNumericColumns(r, ['created_at', 'expires_at', 'used_at']);

export function createEmailLinkStore(db: Knex) {
  return {
    db,
    insert: async (row: EmailLinkRow, trx: Knex = db) => {
      await trx('email_links').insert(row);
    },
    findByHash: async (tokenHash: string): Promise<EmailLinkRow | undefined> => {
      const r = await db('email_links').where({ token_hash: tokenHash }).first();
      return r && mapRow(r);
    },
    /** When the account's newest open link to `email` was sent, if one is open at `at`. */
    newestOpen: async (accountId: string, email: string, at: number): Promise<number | undefined> => {
      const r = (await db('email_links')
        .where({ account_id: accountId, email })
        .whereNull('used_at')
        .andWhere('expires_at', '>', at)
        .max('created_at as latest')
        .first()) as { latest: number | string | null } | undefined;
      return r?.latest == null ? undefined : Number(r.latest);
    },
    /**
     * Takes the link once: marks it used while it is unused and unexpired (a conditional update: of
     * two uses at once, one takes it), and the account's other open links to the same address with it.
     */
    take: async (row: EmailLinkRow, at: number, trx: Knex): Promise<boolean> => {
      const n = Number(await trx('email_links').where({ id: row.id }).whereNull('used_at').andWhere('expires_at', '>', at).update({ used_at: at }));
      if (n !== 1) return false;
      await trx('email_links').where({ account_id: row.account_id, email: row.email }).whereNull('used_at').update({ used_at: at });
      return true;
    },
    /** Maintenance: links past their 24 hours can never be used. */
    purge: async (before: number) => Number(await db('email_links').where('expires_at', '<=', before).del()),
  };
}

export type EmailLinkStore = ReturnType<typeof createEmailLinkStore>;
