/**
 * Alternated timed runs: every round runs each contender once, in turn, after waiting for a quiet
 * machine; the figures reported are the medians over the rounds, so a disturbance in one round
 * moves one sample rather than the result.
 */
import type { BenchContext } from './context';
import { runLoad, LoadRequest } from './load';
import { median, sampleProcess } from './measure';

export interface Contender {
  name: string;
  /** The processes whose CPU and memory count for it (one service, or two for scale-out). */
  pids: number[];
  targets: string[];
  request: (connection: number, n: number) => LoadRequest;
  okStatuses?: number[];
}

export interface ContenderResult {
  name: string;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerOp: number;
  peakRssMiB: number;
  errors: number;
  firstError?: string;
  /** '' or 'machine busy in n of m rounds'. */
  note: string;
}

export async function compare(ctx: BenchContext, contenders: Contender[], connections: number, label: string): Promise<Map<string, ContenderResult>> {
  const samples = new Map(
    contenders.map((c) => [
      c.name,
      [] as { perSecond: number; p50: number; p99: number; cpuPerOp: number; rss: number; errors: number; firstError?: string; busy: boolean }[],
    ]),
  );
  for (let round = 1; round <= ctx.options.rounds; round++) {
    for (const contender of contenders) {
      const busyNote = await ctx.quiet();
      let samplers: ReturnType<typeof sampleProcess>[] = [];
      let usage: { cpuMs: number; peakRssMiB: number }[] = [];
      const result = await runLoad({
        targets: contender.targets,
        connections,
        seconds: ctx.options.seconds,
        warmupSeconds: ctx.options.warmupSeconds,
        request: contender.request,
        okStatuses: contender.okStatuses,
        onTimedStart: () => {
          samplers = contender.pids.map((pid) => sampleProcess(pid));
        },
        onTimedEnd: () => {
          usage = samplers.map((s) => s.stop());
        },
      });
      const cpuMs = usage.reduce((sum, u) => sum + u.cpuMs, 0);
      const rss = usage.reduce((sum, u) => sum + u.peakRssMiB, 0);
      samples.get(contender.name)!.push({
        perSecond: result.perSecond,
        p50: result.p50Ms,
        p99: result.p99Ms,
        cpuPerOp: result.requests ? cpuMs / result.requests : NaN,
        rss,
        errors: result.errors,
        firstError: result.firstError,
        busy: busyNote !== '',
      });
      ctx.log(
        `  ${label} round ${round} ${contender.name}: ${result.perSecond.toFixed(0)}/s p50 ${result.p50Ms.toFixed(1)} ms p99 ${result.p99Ms.toFixed(1)} ms ` +
          `CPU ${(result.requests ? cpuMs / result.requests : NaN).toFixed(2)} ms/op RSS ${rss.toFixed(0)} MiB${result.errors ? ` errors ${result.errors} (${result.firstError})` : ''}${busyNote ? ' (machine busy)' : ''}`,
      );
    }
  }
  const results = new Map<string, ContenderResult>();
  for (const [name, list] of samples) {
    const busy = list.filter((s) => s.busy).length;
    const errors = list.reduce((sum, s) => sum + s.errors, 0);
    const notes = [
      busy ? `machine busy in ${busy} of ${list.length} rounds` : '',
      errors ? `${errors} errors: ${list.find((s) => s.firstError)?.firstError?.slice(0, 80)}` : '',
    ];
    results.set(name, {
      name,
      perSecond: median(list.map((s) => s.perSecond)),
      p50Ms: median(list.map((s) => s.p50)),
      p99Ms: median(list.map((s) => s.p99)),
      cpuMsPerOp: median(list.map((s) => s.cpuPerOp)),
      peakRssMiB: Math.max(...list.map((s) => s.rss)),
      errors,
      firstError: list.find((s) => s.firstError)?.firstError,
      note: notes.filter(Boolean).join('; '),
    });
  }
  return results;
}

/** The notes that say something, each once. */
export function joinNotes(...notes: (string | undefined)[]): string {
  return [...new Set(notes.filter(Boolean))].join('; ');
}
