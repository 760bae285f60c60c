import type { BenchOptions } from './options';
import type { Dataset } from './dataset';
import { waitForQuiet } from './measure';

/** What every part of the benchmark receives (scripts/bench/index.ts builds it once). */
export interface BenchContext {
  options: BenchOptions;
  /** The cached MariaDB data set (undefined when the run is SQLite only). */
  mysql?: Dataset;
  /** The cached SQLite data set (undefined when no part needs it). */
  sqlite?: Dataset;
  /** TLS certificate and key files shared by the service, the bare baselines and receivers. */
  tls: { certFile: string; keyFile: string; cert: string; key: string };
  /** A free port for a process started by a part; never the same twice in one run. */
  nextPort(): number;
  /**
   * Waits for a quiet machine before a timed run; returns a note for the row ('' when quiet,
   * 'machine busy' otherwise) so a figure measured under other load says so.
   */
  quiet(): Promise<string>;
  /** Progress lines on stderr (stdout carries only the results). */
  log(message: string): void;
}

export function quietFor(options: BenchOptions): () => Promise<string> {
  return async () => ((await waitForQuiet({ maxWaitMs: options.quietWaitSeconds * 1000 })) ? '' : 'machine busy');
}
