import type { Knex } from 'knex';

/**
 * On MySQL/MariaDB every table is utf8mb4 with a binary collation, whatever the database default:
 * identifiers, visitor ids and secrets' fingerprints compare byte for byte ("Bob" is not "bob"),
 * and emoji are stored. SQLite compares text byte for byte already.
 */
export function binaryText(knex: Knex, t: Knex.CreateTableBuilder): void {
  if (String(knex.client.config.client).includes('mysql')) {
    t.charset('utf8mb4');
    t.collate('utf8mb4_bin');
  }
}
