/**
 * Measuring primitives for `npm run bench`: percentiles, per-process CPU and memory from /proc,
 * waiting for a quiet machine, and the results table. Linux only (/proc), like the benchmark machine.
 */
import fs from 'node:fs';

/** The value at percentile p (0–100) of an ascending array; nearest-rank, NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))];
}

export function summarize(samplesMs: number[]): { n: number; p50: number; p99: number; mean: number } {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const mean = sorted.length ? sorted.reduce((sum, v) => sum + v, 0) / sorted.length : NaN;
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean };
}

export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Clock ticks per second for /proc/<pid>/stat; 100 on every Linux build Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime + cutime + cstime of a process in ms (children it waited for included), or undefined once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses: split after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the name: state is index 0, so utime (field 14) is index 11, stime 12, cutime 13, cstime 14.
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/**
 * The local database server's process (MariaDB or MySQL on this machine), so its CPU can be put
 * beside the service's; undefined when the database runs elsewhere or the name is not found.
 */
export function localDatabasePid(): number | undefined {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    try {
      const name = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (name === 'mariadbd' || name === 'mysqld') return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** VmRSS and VmHWM (peak resident size) of a process in MiB, or undefined once it is gone. */
export function processMemoryMiB(pid: number): { rssMiB: number; hwmMiB: number } | undefined {
  let status: string;
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { rssMiB: kib('VmRSS') / 1024, hwmMiB: kib('VmHWM') / 1024 };
}

/**
 * Samples one process from now until stop(): CPU used in between (user + system), the highest RSS
 * seen by polling in between (VmHWM is the peak since the process started, so it cannot isolate a
 * window), and the RSS at stop.
 */
export function sampleProcess(pid: number, everyMs = 200): { stop(): { cpuMs: number; peakRssMiB: number; rssMiB: number } } {
  const cpuAtStart = processCpuMs(pid) ?? 0;
  let peakRssMiB = processMemoryMiB(pid)?.rssMiB ?? 0;
  let lastCpu = cpuAtStart;
  const poll = () => {
    const memory = processMemoryMiB(pid);
    if (memory) peakRssMiB = Math.max(peakRssMiB, memory.rssMiB);
    lastCpu = processCpuMs(pid) ?? lastCpu;
  };
  const timer = setInterval(poll, everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      poll();
      const rssMiB = processMemoryMiB(pid)?.rssMiB ?? 0;
      return { cpuMs: lastCpu - cpuAtStart, peakRssMiB: Math.max(peakRssMiB, rssMiB), rssMiB };
    },
  };
}

/** Busy and total jiffies of all cores, from the first line of /proc/stat. */
function systemTicks(): { busy: number; total: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((sum, v) => sum + v, 0);
  // idle (index 3) and iowait (index 4) are time the cores could have spent on the benchmark.
  const idle = values[3] + (values[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * Waits until the machine has been mostly idle for one second (other work uses at most
 * 1 − idleFraction of all cores). Resolves false when that did not happen within maxWaitMs, so the
 * caller can mark the figure as measured on a busy machine.
 */
export async function waitForQuiet(opts: { maxWaitMs?: number; idleFraction?: number } = {}): Promise<boolean> {
  const maxWaitMs = opts.maxWaitMs ?? 60_000;
  const idleFraction = opts.idleFraction ?? 0.85;
  const deadline = Date.now() + maxWaitMs;
  let before = systemTicks();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = systemTicks();
    const total = after.total - before.total;
    const busyFraction = total > 0 ? (after.busy - before.busy) / total : 0;
    if (1 - busyFraction >= idleFraction) return true;
    if (Date.now() >= deadline) return false;
    before = after;
  }
}

export interface BenchRow {
  what: string;
  value: number;
  unit: string;
  /** The bare baseline's figure in the same run, same unit. */
  baseline?: number;
  /** value / baseline (or the inverse for latencies, as the row says in its note). */
  ratio?: number;
  p50Ms?: number;
  p99Ms?: number;
  /** Server CPU (user + system) per request or operation. */
  cpuMsPerOp?: number;
  peakRssMiB?: number;
  note?: string;
}

function formatNumber(value: number | undefined, digits = 2): string {
  if (value === undefined || Number.isNaN(value)) return '-';
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(digits);
}

/** The rows as a markdown table, for stdout and bench-results.md. */
export function formatTable(rows: BenchRow[]): string {
  const header = ['what', 'value', 'bare baseline', 'ratio', 'p50 ms', 'p99 ms', 'CPU ms/op', 'peak RSS MiB', 'note'];
  const escape = (text: string) => text.replace(/\|/g, '\\|');
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const row of rows) {
    const cells = [
      escape(row.what),
      `${formatNumber(row.value)} ${row.unit}`,
      row.baseline === undefined ? '-' : `${formatNumber(row.baseline)} ${row.unit}`,
      formatNumber(row.ratio),
      formatNumber(row.p50Ms),
      formatNumber(row.p99Ms),
      formatNumber(row.cpuMsPerOp),
      formatNumber(row.peakRssMiB, 0),
      escape(row.note ?? ''),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}
