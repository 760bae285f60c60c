import type { Knex } from 'knex';
import { dialectOf } from './knex';

/**
 * `FROM table` walking `index`, for the keyset lists: `db.from(withIndex(db, 'messages', '...'))`.
 *
 * Given `WHERE site_id = ? AND <keyset on created_at, id> ORDER BY created_at DESC, id DESC LIMIT n`,
 * MariaDB 10.11 estimates the keyset range as costly as the whole site and takes `ref` access on
 * the index's first column instead (EXPLAIN: `type ref`, key_len of site_id alone): it reads every
 * row before the cursor, 25,000 rows for a page at depth 1,000, and for a state filter it even walks
 * the index without the state. FORCE INDEX leaves it only the range on the named index. SQLite's
 * INDEXED BY pins the same index (the planner has no statistics: `ANALYZE` is never run).
 */
export function withIndex(db: Knex, table: string, index: string): Knex.Raw {
  return dialectOf(db) === 'mysql' ? db.raw('?? FORCE INDEX (??)', [table, index]) : db.raw('?? INDEXED BY ??', [table, index]);
}

/**
 * `table` for the inner side of a join by its primary key: on MariaDB only the primary key may be
 * used, so a filter on one of its columns (a delivery's state) cannot make the optimizer start
 * from this table and sort everything it finds. SQLite keeps its own choice (the outer table's
 * INDEXED BY already sets the order there).
 */
export function joinedByPrimaryKey(db: Knex, table: string): Knex.Raw | string {
  return dialectOf(db) === 'mysql' ? db.raw('?? FORCE INDEX (PRIMARY)', [table]) : table;
}
