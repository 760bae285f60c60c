import type { Knex } from 'knex';

interface Runner {
  run(): Promise<unknown>;
}
interface RunnerClient {
  runner(builder: { toSQL(): { sql: string } | { sql: string }[] }): Runner;
}

/**
 * Holds each statement of `db` whose SQL matches `match` before it takes a connection, until
 * `release()`, and counts them: a poll stopped at its read while the rest of the instance (streams,
 * writes, a single SQLite connection) goes on. Transactions' clients inherit the hold.
 */
export function holdStatements(db: Knex, match: RegExp): { readonly held: number; release(): void } {
  const client = db.client as RunnerClient;
  const runner = client.runner;
  let open = () => {};
  const gate = new Promise<void>((r) => (open = r));
  let held = 0;
  client.runner = function (this: RunnerClient, builder) {
    const r = runner.call(this, builder);
    let sql = '';
    try {
      sql = [builder.toSQL()]
        .flat()
        .map((q) => q.sql)
        .join(';');
    } catch {
      return r; // not a statement this hold is about
    }
    if (!match.test(sql)) return r;
    const run = r.run.bind(r);
    r.run = async () => {
      held++;
      await gate;
      return run();
    };
    return r;
  };
  return {
    get held() {
      return held;
    },
    release() {
      // The hold was an own property over the prototype's method: removing it restores that.
      delete (client as Partial<RunnerClient>).runner;
      if (client.runner !== runner) client.runner = runner;
      open();
    },
  };
}

/** How many statements `db` sends while `run` runs (a page's cost as a count, never a time). */
export async function countStatements(db: Knex, run: () => Promise<unknown>): Promise<number> {
  let n = 0;
  const count = () => void n++;
  db.on('query', count);
  try {
    await run();
  } finally {
    db.off('query', count);
  }
  return n;
}
