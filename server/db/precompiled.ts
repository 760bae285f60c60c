import type { Knex } from 'knex';
import { dialectOf } from './dialect';

/** Stand-ins for the values while Knex compiles: integers, so `.limit()` takes them too. */
const MARKER_BASE = 1_987_654_321;

type Slot = { value: number } | { constant: unknown };

/**
 * A read statement of the hot path (the key lookup, the messages page) built with Knex's query
 * builder once per shape and then sent as raw SQL with each call's values. Knex compiles a builder
 * into SQL on every run (about 60 % of its cost per query in a CPU profile of the read path); the
 * SQL of a shape never changes, only its values do. `build(v)` receives stand-ins for the `arity`
 * values and must use each where the value goes; the compiled bindings are checked against them
 * (anything else in the bindings, e.g. the `1` of `.first()`, is kept as a constant). Rows come back
 * as the driver gives them (mysql2: [rows, fields]; better-sqlite3: rows), so map them as usual.
 */
export function precompiled<Row>(db: Knex, arity: number, build: (v: number[]) => Knex.QueryBuilder) {
  let compiled: { sql: string; slots: Slot[] } | undefined;
  const compile = () => {
    const markers = Array.from({ length: arity }, (_, i) => MARKER_BASE + i);
    const { sql, bindings } = build(markers).toSQL();
    const slots: Slot[] = bindings.map((b) => {
      const i = typeof b === 'number' ? markers.indexOf(b) : -1;
      return i >= 0 ? { value: i } : { constant: b };
    });
    const used = new Set(slots.flatMap((s) => ('value' in s ? [s.value] : [])));
    if (used.size !== arity) throw new Error(`precompiled statement uses ${used.size} of its ${arity} values: ${sql}`);
    return { sql, slots };
  };
  return async (values: readonly unknown[]): Promise<Row[]> => {
    compiled ??= compile();
    const bindings = compiled.slots.map((s) => ('value' in s ? values[s.value] : s.constant));
    const result = await db.raw(compiled.sql, bindings as Knex.RawBinding[]);
    // mysql2 answers [rows, fields]; better-sqlite3 the rows.
    return (Array.isArray(result?.[0]) ? result[0] : result) as Row[];
  };
}

/**
 * An insert of one row into `table` with these columns, compiled by Knex's builder once per engine
 * and then sent as raw SQL (see precompiled) in the Knex or transaction the call gives: the write
 * path's inserts (a reply writes four rows) paid the builder on every row. A column the row leaves
 * out is written as null, so only for nullable columns without another default.
 */
export function precompiledInsert<Row extends object>(table: string, columns: readonly (keyof Row & string)[]) {
  const compiled = new Map<string, { sql: string; order: number[] }>();
  const compile = (on: Knex) => {
    const markers = columns.map((_, i) => MARKER_BASE + i);
    const { sql, bindings } = on(table)
      .insert(Object.fromEntries(columns.map((c, i) => [c, markers[i]])))
      .toSQL();
    const order = bindings.map((b) => markers.indexOf(b as number));
    if (order.length !== columns.length || order.some((i) => i < 0)) throw new Error(`precompiled insert does not bind each column once: ${sql}`);
    return { sql, order };
  };
  return async (on: Knex, row: Row): Promise<void> => {
    const dialect = dialectOf(on);
    let statement = compiled.get(dialect);
    if (!statement) compiled.set(dialect, (statement = compile(on)));
    await on.raw(
      statement.sql,
      statement.order.map((i) => (row[columns[i]] ?? null) as Knex.RawBinding),
    );
  };
}
