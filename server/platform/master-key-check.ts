import type { Knex } from 'knex';
import { decrypt, deriveKey, masterKeyCheckValue, safeEqual } from './crypto';
import { deriveKeys } from './master-key';
import { StartupError } from './startup';
import { isUniqueViolation } from '../db/knex';

const ROW_ID = 'master';

/** Where the key came from, for the message: the setting, or the file it was generated into. */
export interface MasterKeySource {
  fromEnv: boolean;
  file: string;
}

/**
 * Refuses a master key other than the one the data was made with, at start, before anything is
 * encrypted or signed with it: with a wrong key every event delivery would fail to decrypt its
 * signing secret, and every signed link and cursor would be refused. The check value is written on
 * the first start; a database made before the check existed gets it only when the key opens the
 * secrets already stored (or none are stored yet). Two processes starting at once insert under one
 * fixed id: the second one compares against the first's value.
 */
export async function checkMasterKey(db: Knex, master: Buffer, source: MasterKeySource, now: () => number = Date.now): Promise<void> {
  const expected = masterKeyCheckValue(master);
  const stored = await storedCheckValue(db);
  if (stored !== undefined) {
    if (!safeEqual(stored, expected)) throw mismatch(source, 'its check value differs');
    return;
  }
  if (!(await opensStoredSecrets(db, master))) throw mismatch(source, 'it does not decrypt the secrets already stored');
  try {
    await db('master_key_check').insert({ id: ROW_ID, check_value: expected, created_at: now() });
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    const first = await storedCheckValue(db);
    if (first === undefined || !safeEqual(first, expected)) throw mismatch(source, 'another process started with another key');
  }
}

async function storedCheckValue(db: Knex): Promise<string | undefined> {
  const row = (await db('master_key_check').where({ id: ROW_ID }).first('check_value')) as { check_value: string } | undefined;
  return row?.check_value;
}

/** One sealed secret of each kind, if any: a key that opens them is the key they were sealed with. */
async function opensStoredSecrets(db: Knex, master: Buffer): Promise<boolean> {
  const webhook = (await db('webhook_endpoints').first('secret_encrypted')) as { secret_encrypted: string } | undefined;
  const identity = (await db('site_window_settings').whereNotNull('identity_secret_encrypted').first('identity_secret_encrypted')) as
    { identity_secret_encrypted: string } | undefined;
  const samples: [Buffer, string | undefined][] = [
    [deriveKeys(master).webhookSecrets, webhook?.secret_encrypted],
    // services.ts seals them under this sub-key (createAccessService).
    [deriveKey(master, 'identity-secrets'), identity?.identity_secret_encrypted],
  ];
  for (const [key, sealed] of samples) {
    if (sealed === undefined) continue;
    try {
      decrypt(key, sealed);
    } catch {
      return false;
    }
  }
  return true;
}

function mismatch(source: MasterKeySource, why: string): StartupError {
  const setting = source.fromEnv ? 'MASTER_KEY' : `The master key in ${source.file} (MASTER_KEY unset)`;
  const recover = source.fromEnv
    ? `start with the MASTER_KEY this database was first started with (every instance, worker and CLI needs the same one)`
    : `put back the master.key this database was made with, or set MASTER_KEY to that key`;
  return new StartupError(
    `${setting} does not match the key this database was made with (${why}): ${recover}; ` +
      `if that key is lost, stored event signing secrets and identity secrets cannot be recovered: see docs/operations.md, "A lost master key"`,
  );
}
