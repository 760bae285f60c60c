/**
 * Writes: POST /conversations/{id}/messages (a JSON reply) at 8 and 32 connections, with an
 * Idempotency-Key and without one, beside the bare server doing the same inserts in one transaction
 * (lock the conversation, insert the message, move the conversation's times, insert the outbox
 * event). With vs without the key shows what idempotency costs; bare vs service without the key shows
 * what the rest of the pipeline (validation, outbox lookups, limiter) costs. The replies with the key
 * are measured twice, with logs off and at `info` (what users run, with its access log: a second
 * service process), and once more all on one site (one inbox feed counter) against the same spread
 * over the data set's sites.
 * The replies are deleted afterwards and the conversations' times restored, so the data set stays as built.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { createDb } from '../../server/db/knex';
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import { compare, Contender, joinNotes } from './compare';
import { API_BASE, startBareServer, startService, RunningProcess } from './processes';
import { tlsEnv } from './read';
import type { LoadRequest } from './load';

const CONNECTION_COUNTS = [8, 32];

/** Puts the data set back: the replies, their events, inbox feed rows and idempotency records go, the times come back. */
async function restore(db: Knex, since: number, conversations: { id: string; updated_at: number; last_message_at: number | null }[]) {
  await db('idempotency_keys').where('created_at', '>=', since).delete();
  await db('deliveries').where('updated_at', '>=', since).delete();
  await db('inbox_activity').where('created_at', '>=', since).delete();
  await db('events').where('created_at', '>=', since).delete();
  await db('messages').where('origin', 'api').andWhere('created_at', '>=', since).delete();
  for (const c of conversations) await db('conversations').where('id', c.id).update({ updated_at: c.updated_at, last_message_at: c.last_message_at });
}

export async function runWritesPart(ctx: BenchContext, dataset: Dataset): Promise<BenchRow[]> {
  const engine = dataset.engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const open = dataset.sampleConversations.filter((c) => c.state === 'open').map((c) => ({ id: c.id, key: keyOf(dataset, c.siteId) }));
  const db = createDb({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir });
  // As many open conversations of the big site alone: every reply to them takes that one site's
  // inbox feed position, under its counter row's lock held to the commit (server/inbox/store.ts).
  const bigKey = keyOf(dataset, dataset.bigSiteId);
  const oneSite = (
    (await db('conversations').where({ site_id: dataset.bigSiteId, state: 'open' }).orderBy('created_at', 'desc').limit(open.length).select('id')) as {
      id: string;
    }[]
  ).map((c) => ({ id: c.id, key: bigKey }));
  const saved = await db('conversations')
    .whereIn(
      'id',
      [...open, ...oneSite].map((c) => c.id),
    )
    .select('id', 'updated_at', 'last_message_at');
  const since = Date.now();
  const runId = randomBytes(6).toString('hex');
  const service = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: tlsEnv(ctx) });
  // The same service at the level users run, unless the whole bench already runs at it.
  const atInfo =
    (process.env.BENCH_LOG_LEVEL ?? 'silent') === 'info'
      ? undefined
      : await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env: { ...tlsEnv(ctx), LOG_LEVEL: 'info' } });
  const level = process.env.BENCH_LOG_LEVEL ?? 'silent';
  let bare: RunningProcess | undefined;
  const rows: BenchRow[] = [];
  try {
    if (dataset.engine === 'mysql') {
      bare = await startBareServer({ databaseUrl: dataset.databaseUrl!, port: ctx.nextPort(), tlsCertFile: ctx.tls.certFile, tlsKeyFile: ctx.tls.keyFile });
    }
    // Each connection replies to its own conversations, as agents answering different visitors do.
    const reply =
      (prefix: string, idempotent: boolean, label: string, targets = open) =>
      (c: number, n: number): LoadRequest => {
        const target = targets[(c * 131 + n) % targets.length];
        const headers: Record<string, string> = { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' };
        if (idempotent) headers['idempotency-key'] = `bench-${runId}-${label}-${c}-${n}`;
        return {
          method: 'POST',
          path: `${prefix}/conversations/${target.id}/messages`,
          headers,
          body: JSON.stringify({ content: `bench reply ${n} from connection ${c}` }),
        };
      };
    for (const connections of CONNECTION_COUNTS) {
      const contenders: Contender[] = [
        { name: 'service with key', pids: [service.pid], targets: [service.url], request: reply(API_BASE, true, `k${connections}`), okStatuses: [201] },
        { name: 'service without key', pids: [service.pid], targets: [service.url], request: reply(API_BASE, false, `n${connections}`), okStatuses: [201] },
      ];
      if (atInfo)
        contenders.push({
          name: 'service with key, info',
          pids: [atInfo.pid],
          targets: [atInfo.url],
          request: reply(API_BASE, true, `i${connections}`),
          okStatuses: [201],
        });
      if (oneSite.length)
        contenders.push({
          name: 'service, one site',
          pids: [service.pid],
          targets: [service.url],
          request: reply(API_BASE, true, `s${connections}`, oneSite),
          okStatuses: [201],
        });
      if (bare) contenders.push({ name: 'bare', pids: [bare.pid], targets: [bare.url], request: reply('/w', false, `b${connections}`), okStatuses: [201] });
      ctx.log(`writes on ${engine}, ${connections} connections`);
      const results = await compare(ctx, contenders, connections, `writes ${connections}`);
      const withKey = results.get('service with key')!;
      const withoutKey = results.get('service without key')!;
      const bareResult = results.get('bare');
      rows.push({
        what: `reply with Idempotency-Key, ${connections} connections, ${engine}, LOG_LEVEL=${level}${bareResult ? ' (baseline: bare inserts in one transaction)' : ''}`,
        value: withKey.perSecond,
        unit: 'req/s',
        baseline: bareResult?.perSecond,
        ratio: bareResult ? withKey.perSecond / bareResult.perSecond : undefined,
        p50Ms: withKey.p50Ms,
        p99Ms: withKey.p99Ms,
        cpuMsPerOp: withKey.cpuMsPerOp,
        peakRssMiB: withKey.peakRssMiB,
        note: joinNotes(
          bareResult ? `bare: p99 ${bareResult.p99Ms.toFixed(1)} ms, ${bareResult.cpuMsPerOp.toFixed(2)} ms CPU/req` : '',
          withKey.note,
          bareResult?.note,
        ),
      });
      const info = results.get('service with key, info');
      if (info)
        rows.push({
          what: `reply with Idempotency-Key, ${connections} connections, ${engine}, LOG_LEVEL=info with its access log${bareResult ? ' (baseline: bare inserts in one transaction)' : ''}`,
          value: info.perSecond,
          unit: 'req/s',
          baseline: bareResult?.perSecond,
          ratio: bareResult ? info.perSecond / bareResult.perSecond : undefined,
          p50Ms: info.p50Ms,
          p99Ms: info.p99Ms,
          cpuMsPerOp: info.cpuMsPerOp,
          peakRssMiB: info.peakRssMiB,
          note: joinNotes(`the access log adds ${(info.cpuMsPerOp - withKey.cpuMsPerOp).toFixed(2)} ms CPU/req`, info.note),
        });
      rows.push({
        what: `reply without Idempotency-Key, ${connections} connections, ${engine} (baseline: with the key; ratio = what idempotency costs)`,
        value: withoutKey.perSecond,
        unit: 'req/s',
        baseline: withKey.perSecond,
        ratio: withKey.perSecond / withoutKey.perSecond,
        p50Ms: withoutKey.p50Ms,
        p99Ms: withoutKey.p99Ms,
        cpuMsPerOp: withoutKey.cpuMsPerOp,
        note: joinNotes(`idempotency adds ${(withKey.cpuMsPerOp - withoutKey.cpuMsPerOp).toFixed(2)} ms CPU/req`, withoutKey.note),
      });
      const single = results.get('service, one site');
      if (single)
        rows.push({
          what: `reply with Idempotency-Key, every reply on one site (one inbox feed counter), ${connections} connections, ${engine} (baseline: the same spread over ${new Set(dataset.sampleConversations.map((c) => c.siteId)).size} sites; target ratio ≥ 0.8)`,
          value: single.perSecond,
          unit: 'req/s',
          baseline: withKey.perSecond,
          ratio: single.perSecond / withKey.perSecond,
          p50Ms: single.p50Ms,
          p99Ms: single.p99Ms,
          cpuMsPerOp: single.cpuMsPerOp,
          note: joinNotes(`spread: p50 ${withKey.p50Ms.toFixed(1)} ms, p99 ${withKey.p99Ms.toFixed(1)} ms`, single.note),
        });
    }
  } finally {
    await service.stop();
    await atInfo?.stop();
    await bare?.stop();
    await restore(db, since, saved);
    await db.destroy();
  }
  return rows;
}
