import type { Knex } from 'knex';

/** One statement as Knex sent it. */
export interface CapturedQuery {
  sql: string;
  bindings: unknown[];
}

/** Runs `run`, which must send exactly one statement, and answers its result and that statement. */
export async function captureOneQuery<T>(db: Knex, run: () => Promise<T>): Promise<{ result: T; query: CapturedQuery }> {
  const seen: CapturedQuery[] = [];
  const listener = (q: CapturedQuery) => seen.push(q);
  db.on('query', listener);
  try {
    const result = await run();
    expect(seen).toHaveLength(1);
    return { result, query: seen[0] };
  } finally {
    db.off('query', listener);
  }
}

/**
 * Index entries MariaDB stepped through to answer `query`: Handler_read_next/prev, or with index
 * condition pushdown the entries it tested (Handler_icp_attempts; read_* then counts only matches).
 */
export async function entriesRead(db: Knex, query: CapturedQuery): Promise<number> {
  return db.transaction(async (trx) => {
    const counters = async () => {
      const [rows] = await trx.raw("SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_prev', 'Handler_icp_attempts')");
      return new Map<string, number>(rows.map((r: { Variable_name: string; Value: string }) => [r.Variable_name, Number(r.Value)]));
    };
    const before = await counters();
    await trx.raw(query.sql, query.bindings as Knex.RawBinding[]);
    const after = await counters();
    const delta = (name: string) => after.get(name)! - before.get(name)!;
    return Math.max(delta('Handler_read_next') + delta('Handler_read_prev'), delta('Handler_icp_attempts'));
  });
}
