import type { Knex } from 'knex';
import { onMysqlTable } from '../dialect';

/**
 * On MySQL/MariaDB every table is utf8mb4 with a binary collation, whatever the database default:
 * identifiers, visitor ids and secrets' fingerprints compare byte for byte ("Bob" is not "bob"),
 * and emoji are stored. SQLite compares text byte for byte already.
 */
export function binaryText(knex: Knex, t: Knex.CreateTableBuilder): void {
  onMysqlTable(knex, t, (table) => {
    table.charset('utf8mb4');
    table.collate('utf8mb4_bin');
  });
}
