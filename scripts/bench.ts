/**
 * `npm run bench`: measures what the README claims about performance, on the embedded SQLite
 * (or on MySQL when DATABASE_URL is set):
 *   - keyset paging: the time of a page at depth 0 vs deep in a 20,000-row list (should not grow);
 *   - reply throughput through the whole pipeline (auth, rate limit, validation, transaction, outbox).
 * Requests go through a real HTTP listener on loopback (no TLS, to measure the service, not crypto).
 */
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../server/config';
import { openRuntime } from '../server/runtime';
import { createApp } from '../server/app';
import { createLogger } from '../server/platform/logger';
import { createMemoryLimiter } from '../server/http/rate-limit/limiter';
import { newId } from '../server/platform/ids';

const ROWS = Number(process.env.BENCH_ROWS ?? 20_000);

function percentile(sorted: number[], p: number) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function time(n: number, fn: (i: number) => Promise<void>) {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn(i);
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50).toFixed(2), p95: percentile(samples, 95).toFixed(2), n };
}

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-bench-'));
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, RATE_LIMIT_PER_MINUTE: '100000000', LOG_LEVEL: 'silent' });
  const rt = await openRuntime(config);
  const site = await rt.services.access.createSite('bench');
  const key = await rt.services.access.createKey(site.id, ['conversations:read', 'conversations:write', 'media:read']);
  const start = Date.now() - ROWS * 1000;

  // Bulk rows straight into the tables: the setup is not what is measured.
  const convs = Array.from({ length: ROWS }, (_, i) => ({
    id: newId('conv', start + i * 1000), site_id: site.id, visitor_id: `v${i}`, state: i % 4 ? 'open' : 'closed', open_marker: i % 4 ? 1 : null,
    created_at: start + i * 1000, updated_at: start + i * 1000, last_message_at: start + i * 1000, closed_at: i % 4 ? null : start + i * 1000,
  }));
  await rt.db.batchInsert('conversations', convs, 500);
  const longConv = convs[convs.length - 1].id;
  const msgs = Array.from({ length: ROWS }, (_, i) => ({
    id: newId('msg', start + i * 10), conversation_id: longConv, site_id: site.id, direction: 'incoming', origin: 'widget', api_key_id: null,
    content: `message ${i}`, format: 'plain', created_at: start + i * 10,
  }));
  await rt.db.batchInsert('messages', msgs, 500);

  const app = createApp({ services: rt.services, logger: createLogger('silent'), limiter: createMemoryLimiter(1e9), validateResponses: false, ready: async () => true });
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
  const headers = { Authorization: `Bearer ${key.key}`, 'Content-Type': 'application/json' };
  const get = async (p: string) => (await fetch(base + p, { headers })).json() as Promise<{ page: { nextCursor: string } }>;

  // Cursor deep into each list: walk there once with the largest pages.
  async function deepCursor(p: string, pages: number) {
    let cursor = '';
    for (let i = 0; i < pages; i++) cursor = (await get(`${p}${p.includes('?') ? '&' : '?'}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).page.nextCursor;
    return cursor;
  }
  const depth = Math.floor(ROWS / 100) - 2;
  const convCursor = await deepCursor('/conversations', depth);
  const msgCursor = await deepCursor(`/conversations/${longConv}/messages`, depth);

  const results: Record<string, unknown> = {
    rows: ROWS,
    database: config.databaseUrl ? 'mysql' : 'sqlite',
    'conversations page 1 (limit 25), ms': await time(300, () => get('/conversations').then(() => undefined)),
    [`conversations page at row ~${depth * 100} (limit 25), ms`]: await time(300, () => get(`/conversations?cursor=${encodeURIComponent(convCursor)}`).then(() => undefined)),
    'conversations state=open page 1, ms': await time(300, () => get('/conversations?state=open').then(() => undefined)),
    'messages page 1 (limit 25), ms': await time(300, () => get(`/conversations/${longConv}/messages`).then(() => undefined)),
    [`messages page at row ~${depth * 100} (limit 25), ms`]: await time(300, () => get(`/conversations/${longConv}/messages?cursor=${encodeURIComponent(msgCursor)}`).then(() => undefined)),
  };
  const open = convs.filter((c) => c.state === 'open').slice(0, 10).map((c) => c.id);
  const t0 = Date.now();
  const replies = await time(500, async (i) => {
    const res = await fetch(`${base}/conversations/${open[i % open.length]}/messages`, { method: 'POST', headers: { ...headers, 'Idempotency-Key': `bench-${i}` }, body: JSON.stringify({ content: `reply ${i}` }) });
    if (res.status !== 201) throw new Error(`reply answered ${res.status}`);
  });
  results['reply (JSON, with Idempotency-Key), ms'] = replies;
  results['replies per second, one client'] = Math.round(500 / ((Date.now() - t0) / 1000));
  console.log(JSON.stringify(results, null, 2));

  server.close();
  await rt.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
