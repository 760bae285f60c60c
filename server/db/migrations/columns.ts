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
  if (dialectOf(knex) === 'mysql') await redefineString(knex, table, column, length, nullable);
}

/**
 * Lets a text column hold NULL (or, `nullable` false, no longer). MariaDB 10.4+ changes it in place
 * and MySQL 8 rebuilds online; SQLite cannot change a column's nullability, so Knex copies the
 * table there: only for a table nothing refers to (the copy drops the old one).
 */
export async function setStringNullable(knex: Knex, table: string, column: string, length: number, nullable: boolean): Promise<void> {
  if (dialectOf(knex) === 'mysql') return redefineString(knex, table, column, length, nullable);
  await knex.schema.alterTable(table, (t) => {
    const c = t.string(column, length);
    (nullable ? c.nullable() : c.notNullable()).alter();
  });
}

async function redefineString(knex: Knex, table: string, column: string, length: number, nullable: boolean): Promise<void> {
  await knex.raw(`alter table ?? modify ?? varchar(${Number(length)}) character set utf8mb4 collate utf8mb4_bin ${nullable ? 'null' : 'not null'}`, [
    table,
    column,
  ]);
}

/**
 * The columns the delivery engine claims by (server/delivery/rows.ts, DeliveryState) on a queue
 * table, with its due index: the same on every queue so one claim serves them all.
 */
export function deliveryStateColumns(t: Knex.CreateTableBuilder, dueIndex: string): void {
  t.string('status', 16).notNullable(); // pending | delivered | failed
  t.integer('attempts').notNullable().defaultTo(0);
  t.integer('round_base').notNullable().defaultTo(0);
  t.bigInteger('next_attempt_at').notNullable();
  t.string('lease_owner', 64).nullable();
  t.bigInteger('lease_until').nullable();
  t.index(['status', 'next_attempt_at'], dueIndex);
}
