/**
 * Reads held for minutes (issue 28: "flat within 5 % over 10 minutes of load"): GET messages for
 * conversations across every site at 32 connections, without a pause, one window a minute; after
 * each window the bare page-query server runs a short window of its own, so a decline that MariaDB
 * causes (it shows in the bare server too) is told apart from one the service causes (it shows
 * only in the service). Each window's rate, p99, CPU per read and the service's RSS are logged;
 * the rows compare the last three windows with the first three and fit a trend over all of them.
 */
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import { median, sampleProcess } from './measure';
import { runLoad, type LoadRequest } from './load';
import { API_BASE, startBareServer, startService, type RunningProcess } from './processes';
import { tlsEnv } from './read';

const CONNECTIONS = 32;
const WINDOW_SECONDS = 60;
const BARE_WINDOW_SECONDS = 10;

interface Window {
  perSecond: number;
  p99Ms: number;
  cpuMsPerOp: number;
  rssMiB: number;
}

/** The relative change per window of a least-squares line through `values`, times the windows spanned. */
export function trend(values: number[]): number {
  const n = values.length;
  if (n < 2) return 0;
  const meanX = (n - 1) / 2;
  const meanY = values.reduce((s, v) => s + v, 0) / n;
  let num = 0;
  let den = 0;
  values.forEach((v, i) => {
    num += (i - meanX) * (v - meanY);
    den += (i - meanX) ** 2;
  });
  return meanY ? ((num / den) * (n - 1)) / meanY : 0;
}

/** The median of the last three values against that of the first three, minus one. */
export function drift(values: number[]): number {
  const k = Math.min(3, Math.floor(values.length / 2));
  if (k === 0) return 0;
  return median(values.slice(-k)) / median(values.slice(0, k)) - 1;
}

async function timedWindow(
  pid: number,
  opts: { target: string; seconds: number; warmupSeconds: number; request: (c: number, n: number) => LoadRequest },
): Promise<Window> {
  let sampler: ReturnType<typeof sampleProcess> | undefined;
  let usage = { cpuMs: 0, peakRssMiB: 0, rssMiB: 0 };
  const result = await runLoad({
    targets: [opts.target],
    connections: CONNECTIONS,
    seconds: opts.seconds,
    warmupSeconds: opts.warmupSeconds,
    request: opts.request,
    onTimedStart: () => {
      sampler = sampleProcess(pid);
    },
    onTimedEnd: () => {
      usage = sampler!.stop();
    },
  });
  if (result.errors) throw new Error(`soak: ${result.errors} errors (${result.firstError})`);
  return { perSecond: result.perSecond, p99Ms: result.p99Ms, cpuMsPerOp: result.requests ? usage.cpuMs / result.requests : NaN, rssMiB: usage.rssMiB };
}

const percent = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;

export async function runSoakPart(ctx: BenchContext, dataset: Dataset): Promise<BenchRow[]> {
  const minutes = ctx.options.soakMinutes;
  const engine = dataset.engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: tlsEnv(ctx) });
  let bare: RunningProcess | undefined;
  const windows: Window[] = [];
  const bareWindows: Window[] = [];
  try {
    if (dataset.engine === 'mysql')
      bare = await startBareServer({ databaseUrl: dataset.databaseUrl!, port: ctx.nextPort(), tlsCertFile: ctx.tls.certFile, tlsKeyFile: ctx.tls.keyFile });
    const targets = dataset.sampleConversations.map((c) => ({ conversationId: c.id, key: keyOf(dataset, c.siteId) }));
    const pick = (c: number, n: number) => targets[(c * 7919 + n) % targets.length];
    const readAt = (prefix: string) => (c: number, n: number) => {
      const t = pick(c, n);
      return { path: `${prefix}/conversations/${t.conversationId}/messages?limit=25`, headers: { authorization: `Bearer ${t.key}` } };
    };
    const busy = await ctx.quiet();
    ctx.log(
      `soak on ${engine}: ${minutes} one-minute windows of reads${bare ? `, each followed by ${BARE_WINDOW_SECONDS} s of the bare page query` : ''}${busy ? ' (machine busy)' : ''}`,
    );
    for (let i = 0; i < minutes; i++) {
      const w = await timedWindow(service.pid, {
        target: service.url,
        seconds: WINDOW_SECONDS,
        warmupSeconds: i === 0 ? ctx.options.warmupSeconds : 0,
        request: readAt(API_BASE),
      });
      windows.push(w);
      let line = `  minute ${i + 1}: service ${w.perSecond.toFixed(0)}/s p99 ${w.p99Ms.toFixed(1)} ms CPU ${w.cpuMsPerOp.toFixed(3)} ms/op RSS ${w.rssMiB.toFixed(0)} MiB`;
      if (bare) {
        const b = await timedWindow(bare.pid, { target: bare.url, seconds: BARE_WINDOW_SECONDS, warmupSeconds: 1, request: readAt('/q') });
        bareWindows.push(b);
        line += `; bare ${b.perSecond.toFixed(0)}/s p99 ${b.p99Ms.toFixed(1)} ms`;
      }
      ctx.log(line);
    }
  } finally {
    await service.stop();
    await bare?.stop();
  }
  const rates = windows.map((w) => w.perSecond);
  const bareRates = bareWindows.map((w) => w.perSecond);
  const what = `reads held ${minutes} minutes (GET messages across sites, ${CONNECTIONS} connections, ${engine})`;
  return [
    {
      what: `${what}: rate, last three minutes against the first three (target: within 5 %)`,
      value: median(rates.slice(-3)),
      unit: 'req/s',
      baseline: median(rates.slice(0, 3)),
      ratio: median(rates.slice(-3)) / median(rates.slice(0, 3)),
      p99Ms: median(windows.slice(-3).map((w) => w.p99Ms)),
      cpuMsPerOp: median(windows.slice(-3).map((w) => w.cpuMsPerOp)),
      note: [
        `drift ${percent(drift(rates))}, trend ${percent(trend(rates))}`,
        `CPU/read drift ${percent(drift(windows.map((w) => w.cpuMsPerOp)))}`,
        bare ? `bare page query in the same minutes: drift ${percent(drift(bareRates))}, trend ${percent(trend(bareRates))}` : '',
      ]
        .filter(Boolean)
        .join('; '),
    },
    {
      what: `${what}: service RSS, last minute against the first`,
      value: windows[windows.length - 1]?.rssMiB ?? NaN,
      unit: 'MiB',
      baseline: windows[0]?.rssMiB,
      peakRssMiB: Math.max(...windows.map((w) => w.rssMiB)),
      note: `per minute: ${windows.map((w) => w.rssMiB.toFixed(0)).join(', ')}`,
    },
  ];
}
