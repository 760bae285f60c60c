/**
 * Read path and memory: GET /conversations/{id}/messages?limit=25 at 32 connections, for the
 * 30,000-message conversation and for conversations picked across every site, beside the bare
 * server doing the page query only and the bare server doing the key and conversation lookups too.
 * The service's peak RSS over these runs is the memory figure.
 */
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import { compare, Contender, joinNotes } from './compare';
import { API_BASE, startBareServer, startService, RunningProcess } from './processes';
import type { LoadRequest } from './load';

const CONNECTIONS = 32;

type Target = { conversationId: string; key: string };

function readRequest(prefix: string, target: Target): LoadRequest {
  return { path: `${prefix}/conversations/${target.conversationId}/messages?limit=25`, headers: { authorization: `Bearer ${target.key}` } };
}

/** The service (and, on MariaDB, the bare servers) against one way of picking conversations. */
export async function runReadPart(ctx: BenchContext, dataset: Dataset, opts: { memory: boolean; read: boolean }): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: tlsEnv(ctx) });
  let bare: RunningProcess | undefined;
  try {
    if (dataset.engine === 'mysql') {
      bare = await startBareServer({ databaseUrl: dataset.databaseUrl!, port: ctx.nextPort(), tlsCertFile: ctx.tls.certFile, tlsKeyFile: ctx.tls.keyFile });
    }
    const engine = dataset.engine === 'mysql' ? 'MariaDB' : 'SQLite';
    const compiledNote = service.compiled ? '' : 'service run through tsx (no dist/: run npm run build)';
    const long: Target[] = [{ conversationId: dataset.longConversation.id, key: keyOf(dataset, dataset.longConversation.siteId) }];
    const random: Target[] = dataset.sampleConversations.map((c) => ({ conversationId: c.id, key: keyOf(dataset, c.siteId) }));
    const cases = [
      { name: '30,000-message conversation', targets: long },
      { name: 'conversations across all sites', targets: random },
    ];
    let servicePeakRss = 0;
    let barePeakRss = 0;
    for (const which of cases) {
      const pick = (c: number, n: number) => which.targets[(c * 7919 + n) % which.targets.length];
      const contenders: Contender[] = [{ name: 'service', pids: [service.pid], targets: [service.url], request: (c, n) => readRequest(API_BASE, pick(c, n)) }];
      if (bare) {
        contenders.push({ name: 'bare query', pids: [bare.pid], targets: [bare.url], request: (c, n) => readRequest('/q', pick(c, n)) });
        contenders.push({ name: 'bare lookups', pids: [bare.pid], targets: [bare.url], request: (c, n) => readRequest('/l', pick(c, n)) });
      }
      ctx.log(`read path on ${engine}, ${which.name}`);
      const results = await compare(ctx, contenders, CONNECTIONS, `read ${which.name}`);
      const s = results.get('service')!;
      const q = results.get('bare query');
      const l = results.get('bare lookups');
      servicePeakRss = Math.max(servicePeakRss, s.peakRssMiB);
      barePeakRss = Math.max(barePeakRss, q?.peakRssMiB ?? 0, l?.peakRssMiB ?? 0);
      if (!opts.read) continue;
      rows.push({
        what: `GET messages?limit=25, ${which.name}, ${CONNECTIONS} connections, ${engine}${q ? ' (baseline: bare page query only; target ratio ≥ 0.6, p99 ≤ 50 ms)' : ''}`,
        value: s.perSecond,
        unit: 'req/s',
        baseline: q?.perSecond,
        ratio: q ? s.perSecond / q.perSecond : undefined,
        p50Ms: s.p50Ms,
        p99Ms: s.p99Ms,
        cpuMsPerOp: s.cpuMsPerOp,
        peakRssMiB: s.peakRssMiB,
        note: joinNotes(q ? `bare: p99 ${q.p99Ms.toFixed(1)} ms, ${q.cpuMsPerOp.toFixed(2)} ms CPU/req` : '', s.note, q?.note, compiledNote),
      });
      if (l) {
        rows.push({
          what: `same, baseline: bare with the key and conversation lookups (target: CPU/req ≤ 2x bare)`,
          value: s.perSecond,
          unit: 'req/s',
          baseline: l.perSecond,
          ratio: s.perSecond / l.perSecond,
          p50Ms: s.p50Ms,
          p99Ms: s.p99Ms,
          cpuMsPerOp: s.cpuMsPerOp,
          note: joinNotes(
            `bare: p99 ${l.p99Ms.toFixed(1)} ms, ${l.cpuMsPerOp.toFixed(2)} ms CPU/req; CPU ratio ${(s.cpuMsPerOp / l.cpuMsPerOp).toFixed(2)}x`,
            l.note,
          ),
        });
      }
    }
    if (opts.memory) {
      rows.push({
        what: `service RSS under the read load, ${engine} (target ≤ 256 MiB)`,
        value: servicePeakRss,
        unit: 'MiB',
        baseline: bare ? barePeakRss : undefined,
        peakRssMiB: servicePeakRss,
        note: bare ? 'baseline: peak RSS of the bare server over the same runs' : '',
      });
    }
  } finally {
    await service.stop();
    await bare?.stop();
  }
  return rows;
}

export function tlsEnv(ctx: BenchContext): Record<string, string> {
  return { TLS_CERT_FILE: ctx.tls.certFile, TLS_KEY_FILE: ctx.tls.keyFile };
}
