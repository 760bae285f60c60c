/**
 * Cross-instance live latency (`--parts=cross-live`, MariaDB): a visitor's window stream is open on
 * instance A; an agent's API reply is written on instance B, and the time from sending the reply to
 * its event arriving on A's stream is measured, p50 and p99. The baseline is the same reply written
 * on A itself, alternated with B's, in the same run: the difference is the trip through Redis. Both
 * instances share one database and one Redis (REDIS_URL, else 127.0.0.1:6379; without Redis the
 * figure is the 500 ms poll's, and the note says so).
 */
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import { createDatabase } from './delivery';
import { fetchJson } from './load';
import { API_BASE, startService } from './processes';
import { tlsEnv } from './read';
import { redisUrl } from './scaleout';

const ORIGIN = 'https://bench.example';
/** Replies per round, alternating A and B. */
const REPLIES = 200;

/** The p-th percentile (nearest rank) of `values`. */
export function percentileOf(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** A window stream that tells each event's text as it arrives. */
function openStream(base: string, siteId: string, token: string, onData: (chunk: string) => void): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const url = new URL(`/window/v1/sites/${siteId}/events`, base);
    const req = https.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`the stream answered ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', onData);
        resolve(() => req.destroy());
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export async function runCrossLivePart(ctx: BenchContext): Promise<BenchRow[]> {
  const database = await createDatabase(ctx.options.mysqlServerUrl);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-cross-live-'));
  const redis = await redisUrl();
  const env: NodeJS.ProcessEnv = { DATA_DIR: dataDir, DATABASE_URL: database.url, LOG_LEVEL: 'silent', ...(redis ? { REDIS_URL: redis } : {}) };
  const services: Awaited<ReturnType<typeof startService>>[] = [];
  let close = () => {};
  try {
    const runtime = await openRuntime(loadConfig(env));
    const site = await runtime.services.access.createSite('Cross-instance live bench');
    const key = await runtime.services.access.createKey(site.id, ['conversations:read', 'conversations:write']);
    await runtime.services.access.setAllowedOrigins(site.id, [ORIGIN]);
    await runtime.close();
    const serviceEnv = { ...tlsEnv(ctx), ...(redis ? { REDIS_URL: redis } : {}) };
    for (let i = 0; i < 2; i++) services.push(await startService({ databaseUrl: database.url, dataDir, port: ctx.nextPort(), env: serviceEnv }));
    const [a, b] = services;
    const json = { 'content-type': 'application/json' };
    const token = await fetchJson<{ data: { token: string } }>(
      a.url,
      { method: 'POST', path: `/window/v1/sites/${site.id}/token`, headers: { origin: ORIGIN, ...json }, body: '{}' },
      [201],
    );
    const first = await fetchJson<{ data: { conversation: { id: string } } }>(
      a.url,
      {
        method: 'POST',
        path: `/window/v1/sites/${site.id}/messages`,
        headers: { authorization: `Bearer ${token.data.token}`, ...json },
        body: JSON.stringify({ content: 'hello', clientMessageId: 'bench-cross' }),
      },
      [201],
    );
    let text = '';
    const waiting = new Map<string, () => void>();
    close = await openStream(a.url, site.id, token.data.token, (chunk) => {
      text += chunk;
      for (const [marker, done] of waiting) {
        if (!text.includes(marker)) continue;
        waiting.delete(marker);
        done();
      }
    });
    const timings = { same: [] as number[], cross: [] as number[] };
    ctx.log(`cross-instance live: ${REPLIES} replies, alternating the stream's instance and the other${redis ? '' : ' (no Redis: the poll carries them)'}`);
    for (let n = 0; n < REPLIES; n++) {
      const on = n % 2 ? b : a;
      const marker = `cross-live-${n}-${Date.now()}`;
      const arrived = new Promise<void>((resolve) => waiting.set(marker, resolve));
      const started = performance.now();
      await fetchJson(
        on.url,
        {
          method: 'POST',
          path: `${API_BASE}/conversations/${first.data.conversation.id}/messages`,
          headers: { authorization: `Bearer ${key.key}`, ...json },
          body: JSON.stringify({ content: marker }),
        },
        [201],
      );
      await arrived;
      (on === b ? timings.cross : timings.same).push(performance.now() - started);
      text = text.slice(-4096);
    }
    const row = (list: number[]) => ({ p50: percentileOf(list, 50), p99: percentileOf(list, 99) });
    const same = row(timings.same);
    const cross = row(timings.cross);
    return [
      {
        what: `reply on instance B reaches a visitor's stream on instance A (reply sent to event arrived, p50 ms; baseline: the reply written on A itself)`,
        value: cross.p50,
        unit: 'ms',
        baseline: same.p50,
        ratio: cross.p50 / same.p50,
        p50Ms: cross.p50,
        p99Ms: cross.p99,
        note: `${timings.cross.length} replies each; on A itself p99 ${same.p99.toFixed(1)} ms; ${redis ? 'through Redis' : 'no Redis: through the poll'}`,
      },
    ];
  } finally {
    close();
    for (const s of services) await s.stop();
    await database.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
