import type { Knex } from 'knex';
import { invalid } from '../platform/errors';
import { newId } from '../platform/ids';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { PasswordHasher } from './passwords';
import { accountToDto, checkEmail, checkPassword, siteToDto } from './common';
import type { AccountRow, AccountStore } from './store';

export type RegistryStore = Pick<AccountStore, 'db' | 'insertAccount' | 'dropSetupLink' | 'listAccounts' | 'listMembershipsOf'>;

/**
 * The accounts themselves: a new one, made by the CLI, the setup link or an invitation, and the
 * CLI's list. Whichever way an account is made, the setup link ends with it.
 */
export function createAccountRegistry(opts: { store: RegistryStore; hasher: PasswordHasher; now: () => number }) {
  const { store, hasher, now } = opts;

  /**
   * Inserts an account and, in the same transaction, ends the setup link: once any account exists
   * the link must not make a first owner. The link's use takes the same row (a conditional delete),
   * so of a setup and another account made at once, the setup either committed first or finds its
   * link gone.
   */
  async function insert(row: AccountRow, trx?: Knex.Transaction) {
    const write = async (t: Knex.Transaction) => {
      try {
        await store.insertAccount(row, t);
      } catch (err) {
        if (isUniqueViolation(err)) throw invalid('An account with this email already exists.', [{ path: '/body/email', message: 'is taken' }]);
        throw err;
      }
      await store.dropSetupLink(t);
    };
    if (trx) await write(trx);
    else await runInTransaction(store.db, write);
    return row;
  }

  /**
   * A new account's row, its password checked and hashed (slow: call it outside any transaction).
   * `emailVerified`: whether whoever makes it vouches for the mailbox (the operator does; an
   * invitation's link does not, see migration 016).
   */
  async function newRow(email: string, password: string, emailVerified: boolean): Promise<AccountRow> {
    checkPassword(password);
    const at = now();
    const password_hash = await hasher.hash(password);
    return {
      id: newId('usr', at),
      email,
      password_hash,
      created_at: at,
      password_changed_at: at,
      email_verified_at: emailVerified ? at : null,
      display_name: null,
    };
  }

  return {
    newRow,
    insert,
    /** The CLI's `account create`: the operator vouches for the email. */
    async create(rawEmail: string, password: string) {
      return accountToDto(await insert(await newRow(checkEmail(rawEmail), password, true)));
    },
    /** Every account with its sites (the CLI's `account list`). */
    async list() {
      const accounts = await store.listAccounts();
      return Promise.all(accounts.map(async (a) => ({ ...accountToDto(a), sites: (await store.listMembershipsOf(a.id)).map(siteToDto) })));
    },
  };
}

export type AccountRegistry = ReturnType<typeof createAccountRegistry>;
