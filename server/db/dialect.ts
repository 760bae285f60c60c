import type { Knex } from 'knex';

export type Dialect = 'sqlite' | 'mysql';

/**
 * Which engine a Knex instance (or transaction) talks to. For server/db only: feature code and
 * migrations use the named helpers here, in knex.ts and in transaction.ts, which hide the difference.
 * A module of its own because the migrations need it and knex.ts runs the migrations.
 */
export function dialectOf(db: Knex): Dialect {
  const client = String(db.client.config.client);
  return client.includes('mysql') ? 'mysql' : 'sqlite';
}

/**
 * Table options that exist on MySQL/MariaDB only (Knex throws for them on other engines): `apply`
 * runs there and nowhere else.
 */
export function onMysqlTable(db: Knex, table: Knex.CreateTableBuilder, apply: (table: Knex.CreateTableBuilder) => void): void {
  if (dialectOf(db) === 'mysql') apply(table);
}
