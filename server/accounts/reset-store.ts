import type { Knex } from 'knex';
import { withNumericColumns } from '../db/knex';

/** The queries of forgot password: `password_resets` is read and written here and nowhere else. */
export interface PasswordResetRow {
  id: string;
  account_id: string;
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

const mapRow = (r: PasswordResetRow) => withNumericColumns(r, ['created_at', 'expires_at', 'used_at']);

export function createPasswordResetStore(db: Knex) {
  return {
    db,
    insert: async (row: PasswordResetRow, trx: Knex = db) => {
      await trx('password_resets').insert(row);
    },
    findByHash: async (tokenHash: string): Promise<PasswordResetRow | undefined> => {
      const r = await db('password_resets').where({ token_hash: tokenHash }).first();
      return r && mapRow(r);
    },
    /**
     * Takes the link once: marks it used while it is unused and unexpired (a conditional update: of
     * two uses at once, one takes it), and every other open link of the account with it.
     */
    take: async (row: PasswordResetRow, at: number, trx: Knex): Promise<boolean> => {
      const n = Number(await trx('password_resets').where({ id: row.id }).whereNull('used_at').andWhere('expires_at', '>', at).update({ used_at: at }));
      if (n !== 1) return false;
      await trx('password_resets').where({ account_id: row.account_id }).whereNull('used_at').update({ used_at: at });
      return true;
    },
    /** Ends the account's open links: they went to an address the account no longer has. */
    endOpenOf: async (accountId: string, at: number, trx: Knex) =>
      Number(await trx('password_resets').where({ account_id: accountId }).whereNull('used_at').update({ used_at: at })),
    /** Maintenance: links past their hour can never be used. */
    purge: async (before: number) => Number(await db('password_resets').where('expires_at', '<=', before).del()),
  };
}

export type PasswordResetStore = ReturnType<typeof createPasswordResetStore>;
