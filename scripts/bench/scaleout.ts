/**
 * Scale-out: the read path (messages?limit=25 over conversations across all sites, 32 connections)
 * on one service instance, then on two instances on different ports over the same MariaDB (and
 * Redis for the shared rate limit when it answers on REDIS_URL or 127.0.0.1:6379), the connections
 * split over both. On 2 cores shared with MariaDB and the client, close to linear is not expected
 * here: the figure shows where the machine, not the service, becomes the limit.
 */
import net from 'node:net';
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import type { Dataset } from './dataset';
import { keyOf } from './dataset';
import { compare, joinNotes } from './compare';
import { API_BASE, startService } from './processes';
import { tlsEnv } from './read';

const CONNECTIONS = 32;

/** REDIS_URL, else a local Redis when one answers, else none (each instance then limits alone). */
export async function redisUrl(): Promise<string | undefined> {
  if (process.env.REDIS_URL) return process.env.REDIS_URL;
  const answers = await new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: 6379, timeout: 500 }, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
    socket.on('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
  return answers ? 'redis://127.0.0.1:6379' : undefined;
}

export async function runScaleOutPart(ctx: BenchContext, dataset: Dataset): Promise<BenchRow[]> {
  const redis = await redisUrl();
  const env = { ...tlsEnv(ctx), ...(redis ? { REDIS_URL: redis } : {}) };
  const first = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env });
  const second = await startService({ databaseUrl: dataset.databaseUrl, dataDir: dataset.dataDir, port: ctx.nextPort(), env });
  try {
    const targets = dataset.sampleConversations.map((c) => ({ id: c.id, key: keyOf(dataset, c.siteId) }));
    const request = (c: number, n: number) => {
      const t = targets[(c * 7919 + n) % targets.length];
      return { path: `${API_BASE}/conversations/${t.id}/messages?limit=25`, headers: { authorization: `Bearer ${t.key}` } };
    };
    ctx.log('scale-out: one instance vs two');
    const results = await compare(
      ctx,
      [
        { name: 'one', pids: [first.pid], targets: [first.url], request },
        { name: 'two', pids: [first.pid, second.pid], targets: [first.url, second.url], request },
      ],
      CONNECTIONS,
      'scale-out',
    );
    const one = results.get('one')!;
    const two = results.get('two')!;
    return [
      {
        what: `read path on two service instances vs one, ${CONNECTIONS} connections split over both, MariaDB${redis ? ' + Redis' : ''}`,
        value: two.perSecond,
        unit: 'req/s',
        baseline: one.perSecond,
        ratio: two.perSecond / one.perSecond,
        p50Ms: two.p50Ms,
        p99Ms: two.p99Ms,
        cpuMsPerOp: two.cpuMsPerOp,
        peakRssMiB: two.peakRssMiB,
        note: joinNotes(
          `one instance: p99 ${one.p99Ms.toFixed(1)} ms, ${one.cpuMsPerOp.toFixed(2)} ms CPU/req; 2 cores shared with MariaDB and the client`,
          one.note,
          two.note,
        ),
      },
    ];
  } finally {
    await first.stop();
    await second.stop();
  }
}
