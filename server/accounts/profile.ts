import { notSignedIn, type Manager } from './common';
import { checkLine } from '../platform/text';
import type { AccountStore } from './store';

export type ProfileStore = Pick<AccountStore, 'findAccount' | 'setDisplayName'>;

/** The longest display name, in code points (the `accounts.display_name` column of migration 018). */
export const MAX_DISPLAY_NAME = 80;

/**
 * A display name as typed: null, empty or only spaces clears it (the email's local part shows
 * instead, `memberDisplayName`); anything else is trimmed, NFC, 1 to 80 characters on one line
 * with no control or invisible characters (a bidi override would let "Support" read otherwise).
 */
export function checkDisplayName(raw: string | null): string | null {
  if (raw === null || !raw.trim()) return null;
  return checkLine(raw, { what: 'The display name', max: MAX_DISPLAY_NAME, path: '/body/displayName' });
}

/**
 * What an account says of itself beyond its credentials: its display name, shown to the site's
 * members (lists, rows, notes) and, unless a site turns agent names off, to visitors on its replies.
 * Not audited: it changes no right; the next read shows the new name everywhere.
 */
export function createProfile(opts: { store: ProfileStore }) {
  const { store } = opts;
  return {
    async setDisplayName(manager: Manager, raw: string | null): Promise<void> {
      const name = checkDisplayName(raw);
      if (!(await store.findAccount(manager.accountId))) throw notSignedIn();
      await store.setDisplayName(manager.accountId, name);
    },
  };
}

export type Profile = ReturnType<typeof createProfile>;
