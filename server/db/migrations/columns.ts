import type { Knex } from 'knex';
import { dialectOf, onMysqlTable } from '../dialect';

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

/**
 * Makes a text column longer where the engine enforces lengths: MySQL/MariaDB (strict mode
 * refuses a longer value). SQLite does not enforce a declared length, and changing a column there
 * means copying the whole table, so it is left as it is.
 */
export async function widenString(knex: Knex, table: string, column: string, length: number, nullable: boolean): Promise<void> {
  if (dialectOf(knex) !== 'mysql') return;
  await knex.raw(`alter table ?? modify ?? varchar(${Number(length)}) character set utf8mb4 collate utf8mb4_bin ${nullable ? 'null' : 'not null'}`, [
    table,
    column,
  ]);
}
