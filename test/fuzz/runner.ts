import fc from 'fast-check';
import { TEST_DB } from '../helpers/db';
import type { Operation } from './operations';
import { describeCase, FuzzCase } from './requests';
import { problemsWith, describeOutcome, Expectations } from './checks';
import type { FuzzServer } from './wire';

/**
 * The settings every fuzz file reads from the environment:
 *   FUZZ_RUNS=<n>                               cases (each file has its own default for `npm test`)
 *   FUZZ_SEED=<seed> FUZZ_PATH=<path>           replay the failure a run printed
 *   FUZZ_CONCURRENCY=<n>                        streams side by side (default 4)
 *   FUZZ_KEEP_GOING=1                           record every distinct failure and go on
 */
export function fuzzSettings(defaultRuns: number) {
  const path = process.env.FUZZ_PATH || undefined;
  return {
    runs: Number(process.env.FUZZ_RUNS ?? defaultRuns),
    seed: process.env.FUZZ_SEED === undefined ? Date.now() ^ (Math.random() * 0x100000000) : Number(process.env.FUZZ_SEED),
    path,
    /**
     * Independent streams of cases run side by side (seeds SEED, SEED+1, ...): the app meets
     * concurrent traffic, and the wait of one request on the database is another's turn. A replay
     * (FUZZ_PATH) runs the one stream it names.
     */
    streams: path ? 1 : Math.max(1, Number(process.env.FUZZ_CONCURRENCY ?? 4)),
    /** Exploration: record every distinct failure and go on, instead of stopping at the first. */
    keepGoing: process.env.FUZZ_KEEP_GOING === '1',
  };
}

export interface FuzzRun {
  /** Named in the summary and the replay line, e.g. `test/fuzz/api.fuzz.test.ts`. */
  file: string;
  settings: ReturnType<typeof fuzzSettings>;
  cases: fc.Arbitrary<FuzzCase>;
  server: FuzzServer;
  expectations: Expectations;
  /** Exceptions no handler caught, collected by the caller's capture callback. */
  uncaught: unknown[];
  /** Operations a long enough run must have seen succeed at least once (the generators reach the handlers). */
  mustSucceed: Operation[];
}

/** Runs the property over `runs` cases in `streams` streams; throws a report of every failure (with its replay line). */
export async function runFuzz(r: FuzzRun): Promise<{ statuses: Map<string, Map<number | string, number>>; seconds: number; total: number }> {
  const { settings, uncaught } = r;
  const statuses = new Map<string, Map<number | string, number>>();
  /** Per operation: how often each status (or outcome) came back, and `ms`, the summed latency. */
  const count = (op: string, key: number | string, by = 1) => {
    const m = statuses.get(op) ?? new Map();
    m.set(key, (m.get(key) ?? 0) + by);
    statuses.set(op, m);
  };

  const distinct = new Map<string, string>();
  const property = fc.asyncProperty(r.cases, async (c: FuzzCase) => {
    const before = uncaught.length;
    const outcome = await r.server.send(c);
    const problems = problemsWith(c, outcome, r.expectations);
    for (const err of uncaught.slice(before)) {
      const where = settings.streams > 1 ? ` (raised while this request or one of ${settings.streams - 1} others was in flight)` : '';
      problems.push(`uncaught exception, which would end the process${where}: ${(err as Error)?.stack?.split('\n').slice(0, 4).join(' | ') ?? String(err)}`);
    }
    count(c.operationId, outcome.kind === 'answer' ? outcome.answer.status : outcome.kind);
    count(c.operationId, 'ms', outcome.ms);
    if (!problems.length) return;
    const report = `${problems.join('\n')}\nanswer: ${describeOutcome(outcome)}`;
    if (!settings.keepGoing) throw new Error(report);
    const kind = `${c.operationId}: ${problems[0].replace(/req_\w+|\d+ ms/g, '')}`;
    if (!distinct.has(kind)) distinct.set(kind, `${describeCase(c)}\n${report}`);
  });

  const started = performance.now();
  const perStream = Math.ceil(settings.runs / settings.streams);
  // allSettled: a stream that breaks must not leave the others running after the test ends.
  const settled = await Promise.allSettled(
    Array.from({ length: settings.streams }, (_, i) =>
      fc.check(property, { numRuns: perStream, seed: (settings.seed + i) | 0, path: settings.path, endOnFailure: false }),
    ),
  );
  const broken = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (broken) throw broken.reason;
  const runs = settled.map((s) => (s as PromiseFulfilledResult<fc.RunDetails<[FuzzCase]>>).value);
  const seconds = (performance.now() - started) / 1000;
  const total = runs.reduce((n, d) => n + d.numRuns, 0);
  const summary = [...statuses].map(([op, m]) => `${op} ${JSON.stringify(Object.fromEntries(m))}`).join('\n  ');
  process.stdout.write(
    `${r.file} (${TEST_DB}): ${total} cases in ${seconds.toFixed(1)} s (${Math.round(total / seconds)}/s), ${settings.streams} stream(s), seeds ${runs.map((d) => d.seed).join(', ')}\n  ${summary}\n`,
  );
  const failures = runs
    .filter((d) => d.failed)
    .map((d) => {
      const counterexample = d.counterexample ? describeCase(d.counterexample[0]) : '(none)';
      return (
        `Fuzz failure. Replay: FUZZ_SEED=${d.seed} FUZZ_PATH=${d.counterexamplePath} TEST_DB=${TEST_DB} npx jest --runInBand ${r.file}\n\n` +
        `Request:\n${counterexample}\n\n${d.errorInstance instanceof Error ? d.errorInstance.message : String(d.errorInstance)}\n\n` +
        `(${d.numShrinks} shrinks; fast-check: seed ${d.seed}, path "${d.counterexamplePath}"` +
        `${settings.streams > 1 ? `; found with ${settings.streams} streams side by side, the replay runs this one alone` : ''})`
      );
    });
  if (distinct.size || failures.length) {
    throw new Error([...(distinct.size ? [`${distinct.size} kinds of failure:`] : []), ...distinct.values(), ...failures].join('\n\n'));
  }

  // The generators must reach the handlers, not only the validator: every operation got a success.
  if (!settings.path && settings.runs >= 2000) {
    for (const op of r.mustSucceed) {
      const got = [...(statuses.get(op.operationId) ?? new Map()).keys()].filter((s) => typeof s === 'number' && s >= 200 && s < 300);
      expect({ operation: op.operationId, successes: got.length > 0 }).toEqual({ operation: op.operationId, successes: true });
    }
  }
  return { statuses, seconds, total };
}
