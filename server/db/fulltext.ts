import type { Knex } from 'knex';
import { dialectOf } from './dialect';

/**
 * Full-text indexes on both engines, behind named helpers (the search read model's, server/search):
 * an InnoDB `FULLTEXT` index on MySQL/MariaDB, an FTS5 table with external content on SQLite. Both
 * match case- and accent-insensitively, split words on anything but letters, digits and `_`, and take
 * every word of a query as a required prefix. Words are made by `searchWords`
 * (server/search/words.ts), so no operator of either syntax ever reaches the engine.
 */

/** The FTS5 table that indexes `table.column` on SQLite. */
const ftsTable = (table: string) => `${table}_fts`;

/** On MySQL, the empty stopword list a full-text index of `table` is made with (see createFulltextIndex). */
export const stopwordTable = (table: string) => `${table}_stopwords`;

/**
 * Indexes `table.column` (the table has an integer primary key `id`). On MySQL the column takes a
 * case- and accent-insensitive collation (the tables are binary, which would make matching
 * case-sensitive), and the index is made with an empty stopword list of its own: InnoDB's default
 * list holds "com", "about", "what"..., which an email address or a question needs. The list is
 * read when an index is built, so a rebuild of the table (ALTER TABLE ... FORCE, OPTIMIZE) must
 * run with `SET SESSION innodb_ft_user_stopword_table = '<database>/<table>_stopwords'` too
 * (docs/operations.md). `innodb_ft_enable_stopword = 0` is not used: MariaDB 10.11 builds an
 * empty index with it over rows already in the table. On SQLite, triggers keep the FTS5 table in
 * step with every insert, update and delete, whichever statement or sweep makes it.
 */
export async function createFulltextIndex(knex: Knex, table: string, column: string, indexName: string): Promise<void> {
  if (dialectOf(knex) === 'mysql') {
    await knex.raw('alter table ?? modify ?? text character set utf8mb4 collate utf8mb4_unicode_ci not null', [table, column]);
    // InnoDB takes a stopword table of one VARCHAR column named `value`; an empty one means no stopwords.
    await knex.schema.createTable(stopwordTable(table), (t) => {
      t.string('value', 30);
    });
    const [[{ name }]] = await knex.raw('select database() as name');
    await knex.raw('set session innodb_ft_user_stopword_table = ?', [`${name}/${stopwordTable(table)}`]);
    try {
      await knex.raw('alter table ?? add fulltext index ?? (??)', [table, indexName, column]);
    } finally {
      await knex.raw('set session innodb_ft_user_stopword_table = default');
    }
    return;
  }
  const fts = ftsTable(table);
  // Names are this module's callers' constants, never input.
  await knex.raw(
    `create virtual table ${fts} using fts5(${column}, content='${table}', content_rowid='id', tokenize="unicode61 remove_diacritics 2 tokenchars '_'")`,
  );
  const add = `insert into ${fts}(rowid, ${column}) values (new.id, new.${column});`;
  const remove = `insert into ${fts}(${fts}, rowid, ${column}) values ('delete', old.id, old.${column});`;
  await knex.raw(`create trigger ${table}_fts_insert after insert on ${table} begin ${add} end`);
  await knex.raw(`create trigger ${table}_fts_delete after delete on ${table} begin ${remove} end`);
  await knex.raw(`create trigger ${table}_fts_update after update of ${column} on ${table} begin ${remove} ${add} end`);
}

export async function dropFulltextIndex(knex: Knex, table: string, indexName: string): Promise<void> {
  if (dialectOf(knex) === 'mysql') {
    await knex.raw('alter table ?? drop index ??', [table, indexName]);
    await knex.schema.dropTableIfExists(stopwordTable(table));
    return;
  }
  for (const t of ['insert', 'delete', 'update']) await knex.raw(`drop trigger if exists ${table}_fts_${t}`);
  await knex.raw('drop table if exists ??', [ftsTable(table)]);
}

/** InnoDB boolean mode: every word required, as a prefix (`+word*`). Words hold letters, digits and `_` only. */
export function booleanModeQuery(words: readonly string[]): string {
  return words.map((w) => `+${w}*`).join(' ');
}

/** FTS5: every word a quoted prefix token (`"word"*`), implicitly AND-ed. Words hold letters, digits and `_` only. */
export function fts5Query(words: readonly string[]): string {
  return words.map((w) => `"${w}"*`).join(' ');
}

/** Narrows `q` (a query on `table`) to the rows whose `column` holds every word, as a prefix. */
export function whereFulltextMatch(db: Knex, q: Knex.QueryBuilder, table: string, column: string, words: readonly string[]): Knex.QueryBuilder {
  if (dialectOf(db) === 'mysql') return q.whereRaw('match(??) against (? in boolean mode)', [`${table}.${column}`, booleanModeQuery(words)]);
  const fts = ftsTable(table);
  return q.whereIn(
    `${table}.id`,
    db
      .from(fts)
      .whereRaw('?? match ?', [fts, fts5Query(words)])
      .select('rowid'),
  );
}
