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

/**
 * The separators of a body as MySQL's row test sees them: every run of characters outside a word
 * (letters, digits, marks, `_`), and every token longer than InnoDB indexes (`innodb_ft_max_token_size`
 * 84), which the index cannot find either. PCRE syntax, as MariaDB's REGEXP_REPLACE takes it.
 */
const NON_TOKENS = '[^\\p{L}\\p{N}\\p{M}_]+|[\\p{L}\\p{N}\\p{M}_]{85,}';

/** On SQLite, the name of the row test's function (rowHoldsWords), registered on each connection (server/db/knex.ts). */
export const SQLITE_ROW_MATCH = 'search_row_match';

const foldToken = (text: string) =>
  text
    .normalize('NFD')
    .replace(/(\p{Script=Latin})[\u0300-\u036f]+/gu, '$1')
    .normalize('NFC')
    .toLowerCase();

/**
 * SQLite's row test (pure): 1 when `body` holds every word of `words` (joined by spaces) at the
 * start of a token, as FTS5's `unicode61 remove_diacritics 2 tokenchars '_'` tokenizer splits and
 * folds: tokens are runs of letters, digits, private-use characters and `_`; case folds, and
 * diacritics fold off Latin letters only. A look-up of the row in the FTS5 table would instead read
 * the word's whole list of matches at each row.
 */
export function rowHoldsWords(body: string, words: string): 0 | 1 {
  const tokens = foldToken(body).match(/[\p{L}\p{N}\p{Co}_]+/gu) ?? [];
  return words.split(' ').every((word) => {
    const prefix = foldToken(word);
    return tokens.some((t) => t.startsWith(prefix));
  })
    ? 1
    : 0;
}

/** Gives a SQLite connection the functions of this module. */
export function registerSqliteFunctions(conn: {
  function(name: string, options: { deterministic: boolean }, fn: (...args: never[]) => unknown): unknown;
}): void {
  conn.function(SQLITE_ROW_MATCH, { deterministic: true }, (body: string, words: string) => rowHoldsWords(body, words));
}

/**
 * Narrows `q` (a query on `table`) to the rows whose `column` holds every word as a prefix, tested
 * on each row the query reaches rather than through the full-text index: for a walk over a bounded
 * set of rows (the search's walk, server/search/plan.ts), since the index reads a word's whole list
 * of matches before any other condition applies. It matches what the index matches: on MySQL the
 * word's collation weights (the column's case- and accent-insensitive collation, expansions such as
 * ß = ss included, as InnoDB compares a prefix) at the start of a token, the body's separators made
 * single spaces (a weight is 2 bytes: a match straddling two weights would need one whose first
 * byte is 0x09, the second byte of a space's weight 0x0209, and no letter, digit or `_` has one);
 * on SQLite the tokenizer's rules (rowHoldsWords).
 */
export function whereWordsInRow(db: Knex, q: Knex.QueryBuilder, table: string, column: string, words: readonly string[]): Knex.QueryBuilder {
  if (dialectOf(db) === 'mysql') {
    const tokens = db.raw("weight_string(concat(' ', regexp_replace(??, ?, ' ')))", [`${table}.${column}`, NON_TOKENS]);
    for (const word of words) {
      // First the word's weights anywhere in the body's (what matches has them too), a third of the
      // cost: most entries a window tests fail here, before the regular expression runs.
      q.whereRaw('instr(weight_string(??), weight_string(convert(? using utf8mb4) collate utf8mb4_unicode_ci)) > 0', [`${table}.${column}`, word]);
      q.whereRaw("instr(?, weight_string(concat(' ', convert(? using utf8mb4) collate utf8mb4_unicode_ci))) > 0", [tokens, word]);
    }
    return q;
  }
  return q.whereRaw(`${SQLITE_ROW_MATCH}(??, ?) = 1`, [`${table}.${column}`, words.join(' ')]);
}
